import type { Knex } from 'knex';

/**
 * Variants in constant time. The count moves to the product row (`products.variant_count`, exact,
 * kept by triggers that touch that one row), and `variants.variant_count` keeps only what the
 * inventory bulk route reads from it: whether the product has more than one variant. A new
 * variant gets the product's count; its siblings are rewritten only when the product goes from one
 * variant to two (one row) or back (one row), not on every insert as before (which rewrote all of
 * them: a product's cost grew with the square of its variants). The inventory statement is
 * unchanged and reads no more rows.
 *
 * Inserts are counted once per statement (an AFTER … FOR EACH STATEMENT trigger over the inserted
 * rows), because the products bulk route inserts a product and its variant in one statement, where
 * a row trigger would not yet see the product. Concurrent inserts into one product are serialised
 * on the product row's update, as before.
 */
export async function up(knex: Knex): Promise<void> {
  // Variant writes wait (reads go on) while the products are counted and the triggers swapped, so
  // no variant is added between the count and the trigger that keeps it: a few seconds on 1 M variants.
  await knex.raw('LOCK TABLE variants IN SHARE ROW EXCLUSIVE MODE');
  await knex.raw('ALTER TABLE products ADD COLUMN variant_count integer NOT NULL DEFAULT 0');
  await knex.raw(
    `UPDATE products p SET variant_count = c.n
       FROM (SELECT product_id, count(*)::int AS n FROM variants GROUP BY product_id) c
      WHERE p.id = c.product_id`,
  );
  await knex.raw('DROP TRIGGER variants_count_on_insert ON variants');
  await knex.raw('DROP FUNCTION variants_count_on_insert()');
  await knex.raw(`
    CREATE FUNCTION variants_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      WITH a AS (
        SELECT product_id, count(*)::int AS n FROM inserted GROUP BY product_id
      ), p AS (
        UPDATE products SET variant_count = products.variant_count + a.n FROM a WHERE products.id = a.product_id
        RETURNING products.id, products.variant_count AS total, a.n AS added
      ), targets AS (
        -- The new rows of a product with several variants, and its first one when this statement
        -- made it several (at most one row more).
        SELECT i.id, p.total FROM inserted i JOIN p ON p.id = i.product_id WHERE p.total > 1
        UNION
        SELECT v.id, p.total FROM p JOIN variants v ON v.product_id = p.id WHERE p.total > 1 AND p.total - p.added = 1
      )
      UPDATE variants v SET variant_count = t.total FROM targets t WHERE v.id = t.id;
      RETURN NULL;
    END
    $$`);
  await knex.raw(
    `CREATE TRIGGER variants_count_inserted AFTER INSERT ON variants REFERENCING NEW TABLE AS inserted
       FOR EACH STATEMENT EXECUTE FUNCTION variants_count_inserted()`,
  );
  await knex.raw(`
    CREATE OR REPLACE FUNCTION variants_count_on_remove() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      n integer;
    BEGIN
      IF TG_OP = 'UPDATE' AND NEW.product_id IS NOT DISTINCT FROM OLD.product_id THEN
        RETURN NULL;
      END IF;
      UPDATE products SET variant_count = variant_count - 1 WHERE id = OLD.product_id RETURNING variant_count INTO n;
      IF n = 1 THEN
        UPDATE variants SET variant_count = 1 WHERE product_id = OLD.product_id;
      END IF;
      IF TG_OP = 'UPDATE' THEN
        UPDATE products SET variant_count = variant_count + 1 WHERE id = NEW.product_id RETURNING variant_count INTO n;
        UPDATE variants SET variant_count = coalesce(n, 1) WHERE id = NEW.id;
        IF n = 2 THEN
          UPDATE variants SET variant_count = 2 WHERE product_id = NEW.product_id;
        END IF;
      END IF;
      RETURN NULL;
    END
    $$`);
  await knex.raw('DROP FUNCTION variants_recount(text)');
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
