import { splitStatements } from '../../scripts/migration-lint';

/** How the migration check cuts what knex sent into statements (scripts/migration-lint.ts). */

it('splits at semicolons outside quoted text, identifiers and comments', () => {
  expect(splitStatements(`SELECT 1; SELECT 'a;b'; SELECT "x;y" /* ; */; -- c;d\nSELECT 'it''s;'`)).toEqual([
    'SELECT 1',
    `SELECT 'a;b'`,
    'SELECT "x;y" /* ; */',
    `-- c;d\nSELECT 'it''s;'`,
  ]);
});

it('keeps a function body in dollar quotes whole, tagged or not', () => {
  expect(
    splitStatements('CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1; SELECT 2 $$; SELECT $t$ ; $t$;'),
  ).toEqual(['CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1; SELECT 2 $$', 'SELECT $t$ ; $t$']);
});

it('drops what is only whitespace or comments, and leaves placeholders alone', () => {
  expect(splitStatements('-- a note\n;  ;\nSELECT $1, $2')).toEqual(['SELECT $1, $2']);
});
