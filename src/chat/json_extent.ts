/**
 * Where a JSON object or array that a model is still writing ends. Fed the growing text
 * again and again, it resumes where it stopped, so a long value streamed in small pieces
 * costs linear time. It only balances brackets outside strings: whether the value is valid
 * JSON is JSON.parse's to say once it is complete.
 */
export class JsonExtent {
  #at: number;
  #depth = 0;
  #inString = false;
  #escaped = false;

  /** `start`: the index of the opening `{` or `[`. */
  constructor(start = 0) {
    this.#at = start;
  }

  /** The index just past the value's closing bracket in `text`, or -1 while it is open. */
  scan(text: string): number {
    for (; this.#at < text.length; this.#at++) {
      const c = text.charCodeAt(this.#at);
      if (this.#inString) {
        if (this.#escaped) this.#escaped = false;
        else if (c === BACKSLASH) this.#escaped = true;
        else if (c === QUOTE) this.#inString = false;
      } else if (c === QUOTE) {
        this.#inString = true;
      } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
        this.#depth++;
      } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        if (--this.#depth === 0) return ++this.#at;
      }
    }
    return -1;
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** The end of the complete JSON object or array starting at `start` in `text`, or -1. */
export function jsonEnd(text: string, start: number): number {
  return new JsonExtent(start).scan(text);
}

const PRIMITIVE = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null/y;

/**
 * The end of the complete JSON value (object, array, string, number, literal) starting at
 * `start` in `text`, or -1.
 */
export function jsonValueEnd(text: string, start: number): number {
  const c = text.charCodeAt(start);
  if (c === OPEN_BRACE || c === OPEN_BRACKET) return jsonEnd(text, start);
  if (c === QUOTE) {
    for (let i = start + 1; i < text.length; i++) {
      const d = text.charCodeAt(i);
      if (d === BACKSLASH) i++;
      else if (d === QUOTE) return i + 1;
    }
    return -1;
  }
  PRIMITIVE.lastIndex = start;
  return PRIMITIVE.exec(text) === null ? -1 : PRIMITIVE.lastIndex;
}

/** Parses JSON text, or returns undefined where it is not JSON. */
export function tryParseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A plain JSON object (not null, not an array). */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
