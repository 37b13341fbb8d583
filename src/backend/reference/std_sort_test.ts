/**
 * stdSort against the std::sort it ports: a small C++ program built with g++ (libstdc++,
 * the library llama.cpp's Linux builds sort with) orders the same arrays, full of ties and
 * in the orders that drive introsort into its heapsort fallback, by ggml's descending
 * comparison. Without g++ the test is ignored with a notice.
 */

import { assertEquals } from "../../../tests/support/assert.ts";
import { lacking } from "../../../tests/support/tools.ts";
import { Rng } from "../../gguf/mod.ts";
import { stdSort } from "./std_sort.ts";

const PROGRAM = `
#include <algorithm>
#include <cstdio>
#include <vector>
int main() {
  int n;
  while (std::scanf("%d", &n) == 1) {
    std::vector<float> v(n);
    for (float &x : v) std::scanf("%f", &x);
    std::vector<int> idx(n);
    for (int i = 0; i < n; i++) idx[i] = i;
    const float *d = v.data();
    std::sort(idx.begin(), idx.end(), [d](int a, int b) { return d[a] > d[b]; });
    for (int i : idx) std::printf("%d ", i);
    std::printf("\\n");
  }
}
`;

/** Arrays of every length around the thresholds, few or many distinct values, in orders
 * that make quicksort go deep (sorted, reversed, organ pipe, median-of-three killers). */
function cases(): Float32Array[] {
  const rng = new Rng(2024);
  const out: Float32Array[] = [];
  const lengths = [1, 2, 3, 15, 16, 17, 31, 33, 64, 100, 128, 129, 256, 512];
  for (const n of lengths) {
    for (const distinct of [1, 2, 3, 8, 1000, 1 << 24]) {
      for (const shape of ["random", "sorted", "reversed", "pipe", "killer"]) {
        const v = Float32Array.from({ length: n }, () => rng.int(distinct));
        if (shape === "sorted") v.sort();
        if (shape === "reversed") v.sort().reverse();
        if (shape === "pipe") v.forEach((_, i) => (v[i] = Math.min(i, n - 1 - i)));
        if (shape === "killer") v.forEach((_, i) => (v[i] = i % 2 === 0 ? i : n + i));
        out.push(v);
      }
    }
  }
  return out;
}

Deno.test({
  name: "stdSort orders indices exactly as libstdc++'s std::sort, ties included",
  ignore: lacking("std::sort oracle", ["g++"]),
  fn() {
    const dir = Deno.makeTempDirSync({ prefix: "neuron-stdsort-" });
    try {
      Deno.writeTextFileSync(`${dir}/sort.cpp`, PROGRAM);
      const built = new Deno.Command("g++", {
        args: ["-O2", "-o", `${dir}/sort`, `${dir}/sort.cpp`],
      }).outputSync();
      assertEquals(built.success, true, new TextDecoder().decode(built.stderr));
      const arrays = cases();
      Deno.writeTextFileSync(
        `${dir}/in.txt`,
        arrays.map((v) => `${v.length} ${[...v].join(" ")}`).join("\n") + "\n",
      );
      const run = new Deno.Command("sh", { args: ["-c", `"${dir}/sort" < "${dir}/in.txt"`] })
        .outputSync();
      const lines = new TextDecoder().decode(run.stdout).trim().split("\n");
      assertEquals(lines.length, arrays.length);
      arrays.forEach((v, i) => {
        const idx = Int32Array.from({ length: v.length }, (_, j) => j);
        stdSort(idx, (a, b) => v[a] > v[b]);
        assertEquals([...idx].join(" "), lines[i].trim(), `array ${i} (${v.length} values)`);
      });
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
});
