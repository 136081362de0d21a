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
/**
 * Runs outside one transaction: the products column is added alone (an instant ACCESS EXCLUSIVE
 * lock on products, no rewrite), so product reads never wait behind the count.
 */
export const config = { transaction: false };

/** Drops a trigger and two functions, and validates a CHECK. */
export const phase = 'contract';

export async function up(knex: Knex): Promise<void> {
  // Nullable and without a default when added: no rewrite, the lock held for an instant. New
  // products start at 0; existing ones are counted below, and NOT NULL is proven at the end.
  await knex.raw('ALTER TABLE products ADD COLUMN IF NOT EXISTS variant_count integer');
  await knex.raw('ALTER TABLE products ALTER COLUMN variant_count SET DEFAULT 0');
  await knex.transaction(async (trx) => {
    await swapCounting(trx);
  });
  // NOT NULL without a long lock: a CHECK validated while writes go on (SHARE UPDATE EXCLUSIVE).
  await knex.raw('ALTER TABLE products DROP CONSTRAINT IF EXISTS products_variant_count_not_null');
  await knex.raw(
    'ALTER TABLE products ADD CONSTRAINT products_variant_count_not_null CHECK (variant_count IS NOT NULL) NOT VALID',
  );
  await knex.raw('ALTER TABLE products VALIDATE CONSTRAINT products_variant_count_not_null');
}

/**
 * Counts every product and swaps the triggers in one transaction. Variant writes wait (reads go
 * on, and so do product reads) while the products are counted, so no variant is added between the
 * count and the trigger that keeps it: about two seconds at 1 M variants (`npm run bench:migrate`).
 */
async function swapCounting(knex: Knex.Transaction): Promise<void> {
  await knex.raw(`SET LOCAL lock_timeout = '5s'`);
  await knex.raw('LOCK TABLE variants IN SHARE ROW EXCLUSIVE MODE');
  await knex.raw(
    `UPDATE products p SET variant_count = coalesce(c.n, 0)
       FROM products q LEFT JOIN (SELECT product_id, count(*)::int AS n FROM variants GROUP BY product_id) c
         ON c.product_id = q.id
      WHERE p.id = q.id`,
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
