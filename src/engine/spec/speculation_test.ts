import { assertEquals } from "../../../tests/support/assert.ts";
import { draftShare, resolveSpeculation, Speculation } from "./speculation.ts";
import type { TokenFilter } from "../token_filter.ts";

Deno.test("speculation: drafts share 12 decode rows, none once the batch is large", () => {
  assertEquals([1, 2, 4, 6, 7, 8, 16, 0].map(draftShare), [11, 5, 2, 1, 0, 0, 0, 0]);
});

Deno.test("speculation: a request's fields override the model's, which override the defaults", () => {
  assertEquals(resolveSpeculation(undefined, undefined), { mode: "off", k: 6, n: 5 });
  assertEquals(resolveSpeculation({ mode: "ngram", k: 4 }, undefined), {
    mode: "ngram",
    k: 4,
    n: 5,
  });
  assertEquals(resolveSpeculation({ mode: "ngram", k: 4 }, { k: 2, n: 3 }), {
    mode: "ngram",
    k: 2,
    n: 3,
  });
  assertEquals(resolveSpeculation({ mode: "ngram" }, { mode: "off" }).mode, "off");
});

Deno.test("speculation: a draft is bounded by what the step allows and cut by the filter", () => {
  const tokens = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3];
  const spec = new Speculation({ mode: "ngram", k: 4, n: 3, adaptive: false });
  assertEquals(spec.lookup(tokens, spec.length(16)), [4, 5, 6, 7]);
  assertEquals(spec.lookup(tokens, spec.length(2)), [4, 5]);
  const refuses6: TokenFilter = {
    restrict: () => true,
    accept: () => {},
    admits: (ids) => ids.indexOf(6) < 0 ? ids.length : ids.indexOf(6),
  };
  assertEquals(spec.cut(spec.lookup(tokens, 4), refuses6), [4, 5]);
  assertEquals(new Speculation({ mode: "draft", k: 4, n: 3 }).lookup(tokens, 4), []);
});
