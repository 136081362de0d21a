import type { Middleware, ParameterizedContext } from 'koa';
import { z, ZodError } from 'zod';
import { storableText } from '../lib/text';
import { ApiError, ErrorDetail } from './errors';

/** Dotted path of a zod issue (`line_items.0.amount`), or `(body)` for the whole body. */
function dotted(path: ReadonlyArray<PropertyKey>): string {
  return path.length === 0 ? '(body)' : path.map((p) => storableText(String(p))).join('.');
}

/** One detail per problem; an unknown-keys issue becomes one detail per unknown key. */
export function zodDetails(err: ZodError, prefix: PropertyKey[] = []): ErrorDetail[] {
  return err.issues.flatMap((issue) => {
    const path = [...prefix, ...issue.path];
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({ field: dotted([...path, key]), issue: 'Unrecognized key' }));
    }
    return [{ field: dotted(path), issue: issue.message }];
  });
}

type Parts = { params?: z.ZodType; query?: z.ZodType; body?: z.ZodType };
type Parsed<P extends Parts> = {
  [K in keyof P]: P[K] extends z.ZodType ? z.infer<P[K]> : never;
};

/** The validated input a `validate(...)` middleware put on the context. */
export function input<P extends Parts>(ctx: ParameterizedContext, _schemas: P): Parsed<P> {
  return ctx.state.input as Parsed<P>;
}

/**
 * Validates params, query and body with zod and puts the parsed values on `ctx.state.input`;
 * any failure is a 400 validation_error listing every problem.
 */
export function validate<P extends Parts>(schemas: P): Middleware {
  return async (ctx, next) => {
    const out: Record<string, unknown> = {};
    const details: ErrorDetail[] = [];
    const sources = {
      params: (ctx as unknown as { params?: unknown }).params ?? {},
      query: ctx.query,
      body: ctx.request.body ?? {},
    };
    for (const part of ['params', 'query', 'body'] as const) {
      const schema = schemas[part];
      if (!schema) continue;
      const result = schema.safeParse(sources[part]);
      if (result.success) out[part] = result.data;
      else details.push(...zodDetails(result.error));
    }
    if (details.length > 0) throw ApiError.validation('The request is invalid.', details);
    ctx.state.input = out;
    return next();
  };
}
