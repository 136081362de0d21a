import { responseExcerpt } from '../../src/webhooks/send';

/** The part of an endpoint's answer that an attempt keeps: 1 KB of sanitised UTF-8. */
it('keeps text as it is, tabs and newlines included', () => {
  expect(responseExcerpt(Buffer.from('{"ok":true}\n\tdone'))).toBe('{"ok":true}\n\tdone');
});

it('removes C0 and C1 control characters other than tab and newline', () => {
  expect(responseExcerpt(Buffer.from('a\r\nb\u0000c\u001bd\u007fe\u0085f'))).toBe('a\nbcdef');
});

it('replaces each invalid byte with U+FFFD', () => {
  expect(responseExcerpt(Buffer.from([0x61, 0xff, 0x62, 0xc3]))).toBe('a\ufffdb');
});

it('cuts at 1 KB on a character boundary', () => {
  expect(responseExcerpt(Buffer.from(`${'a'.repeat(1022)}€tail`))).toBe('a'.repeat(1022));
  expect(responseExcerpt(Buffer.from('é'.repeat(600)))).toBe('é'.repeat(512));
});

it('stays within 1 KB when replacement characters make the text longer than the bytes', () => {
  const text = responseExcerpt(Buffer.alloc(1024, 0xff));
  expect(text).toBe('\ufffd'.repeat(341));
  expect(Buffer.byteLength(text)).toBeLessThanOrEqual(1024);
});
