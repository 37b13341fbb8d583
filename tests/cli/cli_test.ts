/** `neuron` as a user runs it: flags, exit codes, config errors on one line. */
import { assert, assertEquals, assertMatch, assertStringIncludes } from "../support/assert.ts";
import { freePort, ROOT, runNeuron, startNeuron } from "../support/processes.ts";

Deno.test("--version prints one line and exits 0", async () => {
  const r = await runNeuron(["--version"]);
  assertEquals(r.code, 0);
  assertMatch(
    r.stdout,
    /^neuron \d+\.\d+\.\d+ \((\w{12}|unknown)(-dirty)?, [\w-]+, deno \d+\.\d+\.\d+\)\n$/,
  );
});

Deno.test("--help lists the commands; serve --help lists its options", async () => {
  const r = await runNeuron(["--help"]);
  assertEquals(r.code, 0);
  assertMatch(r.stdout, /^ {2}serve +run the node/m);
  const s = await runNeuron(["serve", "--help"]);
  assertEquals(s.code, 0);
  for (const opt of ["--config", "--port", "--log-level"]) assertStringIncludes(s.stdout, opt);
});

Deno.test("usage errors exit 2 with one line", async () => {
  const cases: [string[], string][] = [
    [["--worker", "--rank", "1", "--tp-size", "2"], "worker mode"],
    [["frobnicate"], 'unknown command "frobnicate"'],
    [["--bogus"], "bogus"],
    [["-p", "70000"], "--port"],
    [["-p", "abc"], "--port"],
    [["--log-level", "loud"], "--log-level"],
  ];
  await Promise.all(cases.map(async ([args, text]) => {
    const r = await runNeuron(args);
    assertEquals(r.code, 2, args.join(" "));
    assertStringIncludes(r.stderr, text);
    assertEquals(r.stderr.trim().split("\n").length, 1, r.stderr);
  }));
});

Deno.test("bad config files exit 2 with one line naming the file and the key", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const cases: [string, string, string][] = [
      ["syntax.toml", "port = 13131\n[harness.native\n", ":2:"],
      ["unknown.toml", "port = 13131\nprot = 1\n", "unknown key prot"],
      [
        "type.toml",
        '[harness.native]\nthreads = "four"\n',
        "harness.native.threads: expected number, got string",
      ],
      ["port.toml", "port = 70000\n", "port: must be at most 65535, got 70000"],
      ["negport.toml", "port = -1\n", "port: must be at least 0, got -1"],
    ];
    await Promise.all(cases.map(async ([name, text, expected]) => {
      const file = `${dir}/${name}`;
      await Deno.writeTextFile(file, text);
      const r = await runNeuron(["--config", file]);
      assertEquals(r.code, 2, name);
      const lines = r.stderr.trim().split("\n");
      assertEquals(lines.length, 1, r.stderr);
      assertStringIncludes(lines[0], file);
      assertStringIncludes(lines[0], expected);
    }));
    const missing = await runNeuron(["--config", `${dir}/absent.toml`]);
    assertEquals(missing.code, 2);
    assertStringIncludes(missing.stderr, `${dir}/absent.toml: cannot read`);
    const env = await runNeuron(["--config", `${ROOT}neuron.toml`], { NEURON_PORT: "nope" });
    assertEquals(env.code, 2);
    assertStringIncludes(env.stderr, 'NEURON_PORT: expected number, got "nope"');
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a port already in use is a runtime failure: exit 1", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const port = (listener.addr as Deno.NetAddr).port;
    const r = await runNeuron(["--host", "127.0.0.1", "-p", String(port)]);
    assertEquals(r.code, 1);
    assertStringIncludes(r.stderr, "cannot listen");
  } finally {
    listener.close();
  }
});

Deno.test("the example neuron.toml starts; offline, its default model fails visibly", async () => {
  const port = freePort();
  // Offline with an empty cache: the hub model cannot be had, and no retry will change that.
  const node = await startNeuron(["--config", `${ROOT}neuron.toml`, "-p", String(port)], {
    NEURON_HOST: "127.0.0.1",
    HF_HUB_OFFLINE: "1",
    HF_HUB_CACHE: `${await Deno.makeTempDir()}/hub`,
  });
  try {
    assertEquals(node.port, port);
    let activation: Record<string, unknown> = {};
    for (let i = 0; i < 100; i++) {
      const health = await (await fetch(`${node.url}/health`)).json();
      activation = health.activation;
      if (activation.state === "ready") break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assertEquals(activation.state, "ready");
    const failed = activation.failed as { model_id: string; error: string }[];
    assertEquals(failed.map((f) => f.model_id), ["Qwen/Qwen3-0.6B-GGUF"]);
    // Still serving.
    const disc = await fetch(`${node.url}/discovery`);
    assertEquals(disc.status, 200);
    await disc.body?.cancel();
    node.kill("SIGTERM");
    assertEquals(await node.exited, 0);
    const logs = node.stderr.map((l) => JSON.parse(l));
    assert(logs.some((l) => l.msg === "model load failed" && l.model === "Qwen/Qwen3-0.6B-GGUF"));
    assert(logs.some((l) => l.msg === "stopped"));
  } finally {
    try {
      node.kill("SIGKILL");
    } catch {
      // exited already
    }
    await node.exited;
  }
});
