/** Markup that is already safe: produced by `html` or `raw`, never by interpolating a value. */
export class Html {
  constructor(readonly markup: string) {}
  toString(): string {
    return this.markup;
  }
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for an element's content or a quoted attribute value. */
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => ENTITIES[c]);

type Value = Html | string | number | boolean | null | undefined | readonly Value[];

function render(value: Value): string {
  if (value instanceof Html) return value.markup;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false || value === true) return '';
  return escapeHtml(String(value));
}

/**
 * The template tag: every interpolated value is escaped unless it is `Html` already (a nested
 * template). `null`, `undefined` and booleans render nothing, so `${cond && html`…`}` works.
 */
export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0];
  values.forEach((value, i) => {
    out += render(value) + strings[i + 1];
  });
  return new Html(out);
}

/** Trusted markup as is: for constant strings in code only, never for data. */
export const raw = (markup: string): Html => new Html(markup);

/**
 * JSON for a `<script type="application/json">` block: `<`, `>`, `&` and the two line separators
 * are escaped so no value can close the element or be read as markup.
 */
export function jsonScript(value: unknown): Html {
  const json = JSON.stringify(value).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  return new Html(json);
}
