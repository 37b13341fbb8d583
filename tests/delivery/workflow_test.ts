/**
 * The release pipeline, .gitea/workflows/build-prerelease.yml: parsed as YAML (PyYAML,
 * which .ci/run installs), then held to the stages the issue names and to the rest of the
 * repository: the tasks it runs exist, it stages every source the spec lists, it packages
 * every flavour, and it uses the secrets the fleet already has.
 */
import { assert, assertEquals, assertStringIncludes } from "../support/assert.ts";
import { lacking, PYYAML } from "../support/tools.ts";
import { ALL_FLAVOURS } from "../../rpm/flavours.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const WORKFLOW = `${ROOT}.gitea/workflows/build-prerelease.yml`;

interface Step {
  run?: string;
  uses?: string;
  env?: Record<string, string>;
  with?: Record<string, unknown>;
}

interface Job {
  needs?: string | string[];
  "runs-on": string;
  strategy?: { matrix: { flavour: string[] } };
  steps: Step[];
  env?: Record<string, string>;
}

interface Workflow {
  on: { push: { branches: string[] }; workflow_dispatch: unknown };
  jobs: Record<string, Job>;
}

async function loadWorkflow(): Promise<Workflow> {
  const out = await new Deno.Command("python3", {
    args: [
      "-c",
      "import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)",
      WORKFLOW,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert(out.success, `YAML: ${new TextDecoder().decode(out.stderr)}`);
  const raw = JSON.parse(new TextDecoder().decode(out.stdout));
  // YAML 1.1 reads the key `on` as the boolean true.
  return { ...raw, on: raw.on ?? raw["true"] };
}

const needs = (job: Job): string[] =>
  job.needs === undefined ? [] : Array.isArray(job.needs) ? job.needs : [job.needs];

const runs = (job: Job): string => job.steps.map((s) => s.run ?? "").join("\n");

const NO_YAML = lacking("tests/delivery/workflow_test.ts, every test", [PYYAML]);

function workflowTest(name: string, fn: () => Promise<void>): void {
  Deno.test({ name, ignore: NO_YAML, fn });
}

workflowTest("the pipeline runs on pushes to main and by hand", async () => {
  const wf = await loadWorkflow();
  assertEquals(wf.on.push.branches, ["main"]);
  assert("workflow_dispatch" in wf.on);
});

workflowTest(
  "stages: prepare, then lint + tests + build, package per flavour, then publish",
  async () => {
    const { jobs } = await loadWorkflow();
    assertEquals(Object.keys(jobs).sort(), [
      "build",
      "lint",
      "package",
      "prepare",
      "publish",
      "test",
    ]);
    for (const name of ["lint", "test", "build"]) assertEquals(needs(jobs[name]), ["prepare"]);
    assertEquals(needs(jobs.package).sort(), ["build", "prepare"]);
    for (const gate of ["lint", "test", "package"]) {
      assert(needs(jobs.publish).includes(gate), `publish waits for ${gate}`);
    }
    assertStringIncludes(runs(jobs.prepare), "rpm/release.ts");
    assertStringIncludes(runs(jobs.test), ".ci/run");
    assertEquals(jobs.package.strategy?.matrix.flavour, [...ALL_FLAVOURS]);
    assertStringIncludes(runs(jobs.build), `--flavours ${ALL_FLAVOURS.join(",")}`);
  },
);

workflowTest("every deno task the pipeline runs exists", async () => {
  const wf = await loadWorkflow();
  const tasks = JSON.parse(Deno.readTextFileSync(`${ROOT}deno.json`)).tasks;
  const used = Object.values(wf.jobs).flatMap((j) =>
    [...runs(j).matchAll(/deno task ([\w:-]+)/g)].map((m) => m[1])
  );
  assert(used.length >= 2, used.join(","));
  for (const task of used) assert(task in tasks, `deno task ${task} is defined`);
});

workflowTest("the package job stages every source the spec lists", async () => {
  const { jobs } = await loadWorkflow();
  const spec = Deno.readTextFileSync(`${ROOT}rpm/helexa-neuron-prerelease.spec`);
  const sources = [...spec.matchAll(/^Source\d+:\s+(\S+)$/gm)].map((m) => m[1]);
  assertEquals(sources[0], "neuron", "Source0 is the executable");
  const script = runs(jobs.package);
  assertStringIncludes(script, 'SOURCES/neuron"');
  for (const source of sources.slice(1)) {
    const path = source === "LICENSE" ? "LICENSE" : `rpm/${source}`;
    assert(script.includes(` ${path}`), `${path} is copied into SOURCES`);
    Deno.statSync(`${ROOT}${path}`);
  }
});

workflowTest(
  "signing and publishing use the fleet's secrets, passed through the environment",
  async () => {
    const { jobs } = await loadWorkflow();
    const env = jobs.publish.steps.flatMap((s) => Object.entries(s.env ?? {}));
    for (const secret of ["RPM_SIGNING_KEY", "RPM_SIGNING_KEY_ID", "RSYNC_SSH_KEY"]) {
      assert(
        env.some(([k, v]) => k === secret && v === `\${{ secrets.${secret} }}`),
        `${secret} comes from secrets`,
      );
    }
    const script = runs(jobs.publish);
    assert(!script.includes("secrets."), "no secret is templated into a script");
    assertStringIncludes(script, "rpmsign --addsign");
    assertStringIncludes(script, "createrepo_c --update");
    assertStringIncludes(script, "/unstable");
  },
);
