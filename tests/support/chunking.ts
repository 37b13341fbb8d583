/**
 * Output parsers fed one output in every way a stream can cut it: whole, split at every
 * character and every byte (as an incremental detokenizer yields the text of partial UTF-8
 * characters), byte by byte and character by character. Each way must give the same result.
 */

import { assertEquals } from "./assert.ts";
import {
  collect,
  type OutputEvent,
  OutputParser,
  type OutputParserOptions,
  type ParsedOutput,
  parseOutput,
} from "../../src/chat/mod.ts";

/** Feeds `pieces` one by one, then ends the output. */
export function feed(pieces: string[], options: OutputParserOptions): ParsedOutput {
  const parser = new OutputParser(options);
  const events: OutputEvent[] = [];
  for (const piece of pieces) events.push(...parser.push(piece));
  events.push(...parser.finish());
  return collect(events);
}

/** Pieces as an incremental detokenizer would produce them from the bytes cut at `cuts`. */
export function byteSplit(text: string, cuts: number[]): string[] {
  const bytes = new TextEncoder().encode(text);
  const decoder = new TextDecoder();
  const pieces: string[] = [];
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    pieces.push(decoder.decode(bytes.subarray(from, cut), { stream: true }));
    from = cut;
  }
  pieces.push(decoder.decode());
  return pieces;
}

/** Asserts that every cut of `output` parses to `expected`. */
export function assertEveryChunking(
  output: string,
  options: OutputParserOptions,
  expected: ParsedOutput,
): void {
  assertEquals(parseOutput(output, options), expected, "one shot");
  for (let i = 0; i <= output.length; i++) {
    assertEquals(
      feed([output.slice(0, i), output.slice(i)], options),
      expected,
      `split at char ${i}`,
    );
  }
  const length = new TextEncoder().encode(output).length;
  for (let i = 0; i <= length; i++) {
    assertEquals(feed(byteSplit(output, [i]), options), expected, `split at byte ${i}`);
  }
  const everyByte = Array.from({ length }, (_, i) => i + 1);
  assertEquals(feed(byteSplit(output, everyByte), options), expected, "byte by byte");
  assertEquals(feed([...output], options), expected, "char by char");
}
