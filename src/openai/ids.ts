/** Identifiers in OpenAI's style: a prefix and random letters and digits. */

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

export function randomId(prefix: string, length = 24): string {
  const bytes = crypto.getRandomValues(new Uint8Array(length));
  let out = prefix;
  for (const b of bytes) out += ALPHABET[b % ALPHABET.length];
  return out;
}

/** Seconds since the epoch, as OpenAI's `created` fields. */
export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
