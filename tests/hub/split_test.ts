/**
 * A model published as a 3-part split GGUF, beside a vision projector: the projector is
 * never chosen, every part is downloaded (aggregate progress), the model opens by its
 * first part and computes what llama.cpp computed for the unsplit file (its goldens).
 */
import { captureLogs } from "../../src/common/log.ts";
import { fetchModelFile } from "../../src/hub/mod.ts";
import { openModel } from "../../src/runner/mod.ts";
import { ModelInstance } from "../../src/models/instance.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";
import { argmax } from "../../src/common/argmax.ts";
import { fixture, modelGolden } from "../fixtures.ts";
import { writeSplitGguf } from "../support/gguf_split.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { type HubRepo, sha256 } from "./fake_hub.ts";
import { noise, REPO_DIR, withHub } from "./support.ts";

captureLogs(() => {});

const dir = Deno.makeTempDirSync({ prefix: "neuron-split-fixture-" });
const PARTS = writeSplitGguf(fixture("qwen3-tiny-q8_0.gguf"), `${dir}/qwen3-tiny-Q8_0`, 3)
  .map((path) => ({ name: `Q8_0/${path.slice(dir.length + 1)}`, bytes: Deno.readFileSync(path) }));
Deno.removeSync(dir, { recursive: true });
const REPO: HubRepo = {
  id: "test-org/Tiny-GGUF",
  commit: "0123456789abcdef0123456789abcdef01234567",
  files: [
    { name: "mmproj-qwen3-tiny-Q8_0.gguf", bytes: noise(4096), lfs: true },
    ...PARTS.map((p, i) => ({ ...p, lfs: true, xet: i === 1 })),
  ],
};
const REF = { scheme: null, org: "test-org", name: "Tiny-GGUF" };

Deno.test("split GGUF: all parts downloaded, the projector skipped, the model loads and matches llama.cpp", async () => {
  await withHub(async (hub, source) => {
    const progress: number[] = [];
    const got = await fetchModelFile(source, REF, {
      quant: "q8_0",
      onProgress: (p) => progress.push(p.bytes / p.total),
    });
    assertEquals(got.file, PARTS[0].name);
    assertEquals(got.files, PARTS.map((p) => p.name));
    const snapshot = `${source.cacheDir}/${REPO_DIR}/snapshots/${REPO.commit}`;
    for (const p of PARTS) {
      assertEquals(sha256(await Deno.readFile(`${snapshot}/${p.name}`)), sha256(p.bytes), p.name);
    }
    assert(!hub.seen.some((r) => r.path.includes("mmproj")), "the projector is not fetched");
    // One progress for the whole model, rising to 1.
    assert(progress.every((f, i) => i === 0 || f >= progress[i - 1]), "monotonic");
    assertEquals(progress.at(-1), 1);
    const again = await fetchModelFile({ ...source, offline: true }, REF, { quant: "q8_0" });
    assertEquals([again.path, again.files], [got.path, got.files]);

    const model = openModel(got.path);
    const backend = new CpuBackend({ threads: 2 });
    const kv = { blockSize: 16, nBlocks: 16, dtype: "f16" as const };
    const instance = ModelInstance.create(model, backend, kv);
    try {
      const golden = modelGolden("qwen3-tiny-q8_0");
      const p = golden.prompts.find((q) => q.name === "chat_system")!;
      const table = Int32Array.from({ length: 16 }, (_, i) => i);
      const run = (ids: number[], start: number) =>
        instance.forward({
          ids: Int32Array.from(ids),
          layout: {
            positions: Int32Array.from(ids, (_, i) => start + i),
            sequences: [{ rowStart: 0, rowCount: ids.length, blockTable: table }],
          },
          logitRows: Int32Array.from([ids.length - 1]),
        })!;
      const greedy = [argmax(run(p.tokens, 0))];
      for (let k = 1; k < 8; k++) {
        greedy.push(argmax(run([greedy[k - 1]], p.tokens.length + k - 1)));
      }
      assertEquals(greedy, p.greedy.slice(0, 8).map((g) => g.id));
    } finally {
      instance.close();
      backend.close();
      model.file.close();
    }
  }, [REPO]);
});
