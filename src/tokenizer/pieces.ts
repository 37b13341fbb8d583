/**
 * The bytes a token stands for, as llama.cpp's llama_token_to_piece renders them, and the
 * clean-up its detokenizer applies to the joined pieces.
 */

import { ATTR_BYTE, ATTR_CONTROL, ATTR_NORMAL, ATTR_UNKNOWN, ATTR_USER_DEFINED } from "./attrs.ts";
import { CODEPOINT_TO_BYTE } from "./unicode.ts";

const EMPTY = new Uint8Array(0);
const utf8 = new TextEncoder();

/**
 * A token's piece with special tokens rendered: control, unknown and user-defined tokens
 * are their text; normal tokens decode from GPT-2 byte characters (BPE) or have `▁` for
 * space (SPM); byte tokens `<0xXX>` are that byte; anything else (unused) is nothing.
 */
export function renderPiece(text: string, attr: number, spm: boolean): Uint8Array {
  if ((attr & (ATTR_CONTROL | ATTR_UNKNOWN | ATTR_USER_DEFINED)) !== 0) return utf8.encode(text);
  if ((attr & ATTR_NORMAL) !== 0) {
    return spm ? utf8.encode(text.replaceAll("\u2581", " ")) : byteLevelDecode(text);
  }
  if ((attr & ATTR_BYTE) !== 0) return Uint8Array.of(parseInt(text.slice(3, 5), 16) || 0);
  return EMPTY;
}

/**
 * Maps a normal token's GPT-2 characters back to bytes (llama_decode_text). A character
 * outside the byte alphabet becomes llama.cpp's "[UNK_BYTE_0x..]" marker.
 */
function byteLevelDecode(text: string): Uint8Array {
  const out: number[] = [];
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    const byte = cp < CODEPOINT_TO_BYTE.length ? CODEPOINT_TO_BYTE[cp] : -1;
    if (byte >= 0) {
      out.push(byte);
      continue;
    }
    const hex = Array.from(utf8.encode(ch), (b) => b.toString(16).padStart(2, "0")).join("");
    out.push(...utf8.encode(`[UNK_BYTE_0x${hex}${text}]`));
  }
  return Uint8Array.from(out);
}

/**
 * llama.cpp's clean_spaces passes over detokenized bytes, compacting in place as it does:
 * drop the space before ?!., turn " ' " into "'", drop the space before 's 'm 're 've.
 */
export function cleanSpaces(bytes: Uint8Array): Uint8Array {
  const SPACE = 0x20;
  const QUOTE = 0x27;
  const t = bytes;
  const n1 = t.length;
  let total = n1 > 0 ? 1 : 0;
  for (let i = 1; i < n1; i++) {
    const x = t[i];
    if (t[i - 1] === SPACE && (x === 0x3f || x === 0x21 || x === 0x2e || x === 0x2c)) total--;
    t[total++] = x;
  }
  const n2 = total;
  total = n2 > 0 ? 1 : 0;
  for (let i = 1; i < n2; i++) {
    const x = t[i];
    if (x === QUOTE && i + 1 < n2 && t[i - 1] === SPACE && t[i + 1] === SPACE) {
      total--;
      t[++i] = 0;
    }
    t[total++] = x;
  }
  const n3 = total;
  total = n3 > 0 ? 1 : 0;
  for (let i = 1; i < n3; i++) {
    const x = t[i];
    if (t[i - 1] === SPACE && x === QUOTE && i + 1 < n3) {
      const x1 = t[i + 1];
      if (x1 === 0x73 || x1 === 0x6d) total--; // 's 'm
      else if (i + 2 < n3 && (x1 === 0x72 || x1 === 0x76) && t[i + 2] === 0x65) total--; // 're 've
    }
    t[total++] = x;
  }
  return t.subarray(0, total);
}
