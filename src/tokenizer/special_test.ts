import { assertEquals } from "../../tests/support/assert.ts";
import { ATTR_CONTROL, ATTR_NORMAL, ATTR_USER_DEFINED, type Vocab } from "./vocab.ts";
import { type Fragment, SpecialSplitter } from "./special.ts";

// Specials that are prefixes, suffixes and overlaps of one another.
const SPECIALS: [string, number][] = [
  ["<a>", ATTR_CONTROL],
  ["<a><b>", ATTR_CONTROL],
  ["<a", ATTR_USER_DEFINED],
  ["b>", ATTR_USER_DEFINED],
  ["<b>", ATTR_USER_DEFINED],
  ["  ", ATTR_USER_DEFINED],
  ["   ", ATTR_CONTROL],
  ["🙂x", ATTR_USER_DEFINED],
];

function vocab(): Vocab {
  const texts = ["x", ...SPECIALS.map(([t]) => t)];
  const attrs = Uint8Array.from([ATTR_NORMAL, ...SPECIALS.map(([, a]) => a)]);
  const bytes = (t: string): number => new TextEncoder().encode(t).length;
  const specialIds = SPECIALS.map((_, i) => i + 1).sort((a, b) =>
    bytes(texts[b]) - bytes(texts[a]) || a - b
  );
  return {
    model: { kind: "spm", scores: new Float32Array(texts.length), byteIds: new Int32Array(256) },
    texts,
    attrs,
    idOf: new Map(texts.map((t, i) => [t, i])),
    bosId: null,
    eosId: null,
    addBos: false,
    addEos: false,
    addSpacePrefix: false,
    cleanSpaces: false,
    eogIds: new Set(),
    specialIds,
  };
}

/** llama.cpp's partition, plainly: every special token takes its turn over every piece. */
function reference(v: Vocab, text: string, parseSpecial: boolean): Fragment[] {
  let fragments: Fragment[] = [text];
  for (const id of v.specialIds) {
    if (!parseSpecial && (v.attrs[id] & ATTR_CONTROL) !== 0) continue;
    const special = v.texts[id];
    fragments = fragments.flatMap((f) => {
      if (typeof f === "number") return [f];
      const out: Fragment[] = [];
      const parts = f.split(special);
      parts.forEach((p, i) => {
        if (i > 0) out.push(id);
        if (p.length > 0) out.push(p);
      });
      return out;
    });
  }
  return fragments;
}

Deno.test("the splitter cuts special tokens out as llama.cpp's partition does", () => {
  const v = vocab();
  const splitter = new SpecialSplitter(v);
  assertEquals(splitter.split("<a><b>", true), [2]);
  assertEquals(splitter.split("<a><b>", false), [3, ">", 5]);
  assertEquals(splitter.split("x     x", true), ["x", 7, 6, "x"]);
  assertEquals(splitter.split("x     x", false), ["x", 6, 6, " x"]);
});

Deno.test("the splitter agrees with the plain partition on random texts", () => {
  const v = vocab();
  const splitter = new SpecialSplitter(v);
  const pieces = ["<", "a", ">", "b", " ", "x", "🙂", "<a>", "<b>", "\ud83d"];
  let seed = 99;
  const next = (n: number): number => {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    return (seed >>> 8) % n;
  };
  for (let i = 0; i < 3000; i++) {
    const text = Array.from({ length: 1 + next(16) }, () => pieces[next(pieces.length)]).join("");
    for (const parse of [true, false]) {
      assertEquals(splitter.split(text, parse), reference(v, text, parse), JSON.stringify(text));
    }
  }
});
