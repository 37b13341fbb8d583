import { assert, assertEquals, assertRejects, assertThrows } from "../../tests/support/assert.ts";
import { ConfigError } from "./errors.ts";
import { loadConfig, validate } from "./load.ts";
import { nativeConfig } from "./schema.ts";

async function withFile(text: string, fn: (path: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/neuron.toml`;
  await Deno.writeTextFile(path, text);
  try {
    await fn(path);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function failure(text: string, env: Record<string, string> = {}): Promise<string> {
  let message = "";
  await withFile(text, async (path) => {
    const err = await assertRejects(() => loadConfig(path, env), ConfigError);
    assertEquals(err.code, "config_invalid");
    message = err.message.replace(path, "neuron.toml");
  });
  return message;
}

Deno.test("defaults: an empty file gives the documented defaults", async () => {
  await withFile("", async (path) => {
    const { config } = await loadConfig(path, {});
    assertEquals(config.port, 13131);
    assertEquals(config.host, "0.0.0.0");
    assertEquals(config.api_key, undefined);
    assertEquals(config.max_body_bytes, 1024 * 1024);
    assertEquals(config.max_request_bytes, 16 * 1024 * 1024);
    assertEquals(config.shutdown_grace_secs, 30);
    assertEquals(config.max_prompt_tokens, 32768);
    assertEquals(config.http, { header_timeout_secs: 10, idle_timeout_secs: 60, cors_origins: [] });
    assertEquals(config.harnesses.map((h) => h.name), ["native"]);
    assertEquals(config.cuda.libcuda, "libcuda.so.1");
    assertEquals(config.cuda.libnvml, "libnvidia-ml.so.1");
    assertEquals(config.systemd.systemctl, "systemctl");
    assertEquals(config.default_models, []);
    const native = nativeConfig(config);
    assertEquals(native.device, "auto");
    assertEquals(native.model_dirs, []);
    assertEquals(native.admission.max_queue_depth, 64);
  });
});

Deno.test("the root example neuron.toml is valid and lists the default model", async () => {
  const { config } = await loadConfig(new URL("../../neuron.toml", import.meta.url).pathname, {});
  assertEquals(config.default_models[0].model_id, "Qwen/Qwen3-0.6B-GGUF");
  assertEquals(config.default_models[0].quant, "q8_0");
});

Deno.test("fleet-style file: candle harness, external harness, default models", async () => {
  const text = `
port = 14000
[[harnesses]]
name = "candle"
[[harnesses]]
name = "mistralrs"
endpoint = "http://127.0.0.1:8080"
systemd_unit = "mistralrs.service"
[harness.candle]
hf_cache = "/srv/hf"
[harness.candle.sources.mirror]
endpoint = "https://hub.example.org"
[[default_models]]
model_id = "Qwen/Qwen3-8B"
harness = "candle"
quant = "q4_k_m"
`;
  await withFile(text, async (path) => {
    const { config } = await loadConfig(path, {});
    assertEquals(config.port, 14000);
    assertEquals(config.harnesses[1].health_path, "/health");
    assertEquals(nativeConfig(config).hf_cache, "/srv/hf");
    assertEquals(nativeConfig(config).sources.mirror.endpoint, "https://hub.example.org");
  });
  const speculative = `[[default_models]]\nmodel_id = "a/b"\nharness = "native"\n` +
    `speculative = { mode = "ngram", k = 4 }\n`;
  await withFile(speculative, async (path) => {
    const { config } = await loadConfig(path, {});
    assertEquals(config.default_models[0].speculative, { mode: "ngram", k: 4 });
  });
});

Deno.test("errors: one line naming the file and the key", async () => {
  assertEquals(
    await failure(`[[harnesses]]\nname="native"\n[harness.native]\nthreads = "four"\n`),
    "neuron.toml: harness.native.threads: expected number, got string",
  );
  assertEquals(await failure(`prot = 1\n`), "neuron.toml: unknown key prot");
  assertEquals(
    await failure(`[harness.native]\nhf_cache="/x"\nhfcache="/y"\n`),
    "neuron.toml: unknown key harness.native.hfcache",
  );
  assertEquals(
    await failure(`port = 70000\n`),
    "neuron.toml: port: must be at most 65535, got 70000",
  );
  assertEquals(await failure(`port = 1.5\n`), "neuron.toml: port: expected int, got float");
  assertEquals(
    await failure(`[harness.native]\ndevice = "gpu"\n`),
    'neuron.toml: harness.native.device: expected one of "auto", "cpu", "cuda", "reference", got "gpu"',
  );
  assertEquals(
    await failure(`[[harnesses]]\nname = "vllm"\n`),
    "neuron.toml: harnesses[0].endpoint: required for an external harness",
  );
  assertEquals(
    await failure(`[[default_models]]\nmodel_id = "a/b"\nharness = "vllm"\n`),
    'neuron.toml: default_models[0].harness: no [[harnesses]] entry named "vllm"',
  );
  assertEquals(
    await failure(`[[default_models]]\nharness = "native"\n`),
    "neuron.toml: default_models[0].model_id: required key is missing",
  );
  assertEquals(
    await failure(
      `[[default_models]]\nmodel_id = "a/b"\nharness = "native"\nspeculative = { mode = "lookup" }\n`,
    ),
    'neuron.toml: default_models[0].speculative.mode: expected one of "ngram", "draft", "off", got "lookup"',
  );
  assertEquals(
    await failure(
      `[[default_models]]\nmodel_id = "a/b"\nharness = "native"\nspeculative = { mode = "draft" }\n`,
    ),
    "neuron.toml: default_models[0].speculative.mode: draft needs a draft_model",
  );
  const syntax = await failure(`port = 1\nfoo = = 2\n`);
  assertEquals(syntax, 'neuron.toml:2:7: invalid TOML: invalid value (at "foo = = 2")');
  assert(!syntax.includes("\n"));
});

Deno.test("errors: an unreadable file is a ConfigError naming it", async () => {
  const err = await assertRejects(() => loadConfig("/nonexistent/neuron.toml", {}), ConfigError);
  assert(err.message.startsWith("/nonexistent/neuron.toml: cannot read"));
});

Deno.test("env overrides are typed by the schema and win over the file", async () => {
  await withFile(`port = 1000\n[harness.native]\nthreads = 2\n`, async (path) => {
    const { config, ignoredEnv } = await loadConfig(path, {
      NEURON_PORT: "9000",
      NEURON_HARNESS__NATIVE__HF_CACHE: "/x",
      NEURON_HARNESS__NATIVE__THREADS: "8",
      NEURON_HARNESS__NATIVE__MMAP: "false",
      NEURON_HARNESS__NATIVE__MODEL_DIRS: '["/models"]',
      NEURON_API_KEY: "secret",
      NEURON_FIXTURES: "/somewhere",
      HOME: "/root",
    });
    assertEquals(config.port, 9000);
    assertEquals(config.api_key, "secret");
    assertEquals(nativeConfig(config).hf_cache, "/x");
    assertEquals(nativeConfig(config).threads, 8);
    assertEquals(nativeConfig(config).mmap, false);
    assertEquals(nativeConfig(config).model_dirs, ["/models"]);
    assertEquals(ignoredEnv, ["NEURON_FIXTURES"]);
  });
});

Deno.test("env overrides: bad values name the variable", () => {
  const err = assertThrows(() => validate({}, "neuron.toml", { NEURON_PORT: "abc" }), ConfigError);
  assertEquals(err.message, 'NEURON_PORT: expected number, got "abc"');
  const range = assertThrows(
    () => validate({}, "neuron.toml", { NEURON_PORT: "99999" }),
    ConfigError,
  );
  assertEquals(range.message, "NEURON_PORT: port: must be at most 65535, got 99999");
  const list = assertThrows(
    () => validate({}, null, { NEURON_DEFAULT_MODELS__0__QUANT: "q8_0" }),
    ConfigError,
  );
  assert(list.message.startsWith("NEURON_DEFAULT_MODELS__0__QUANT: "), list.message);
});

Deno.test("env overrides reach entries of [[harnesses]] by index", () => {
  const raw = { harnesses: [{ name: "native" }, { name: "vllm", endpoint: "http://a:1" }] };
  const { config } = validate(raw, "neuron.toml", {
    NEURON_HARNESSES__1__ENDPOINT: "http://127.0.0.1:9",
  });
  assertEquals(config.harnesses[1].endpoint, "http://127.0.0.1:9");
});

Deno.test("model specs: devices must match tensor_parallel", () => {
  const err = assertThrows(
    () =>
      validate({
        default_models: [{ model_id: "a/b", harness: "native", tensor_parallel: 2, devices: [0] }],
      }, "neuron.toml"),
    ConfigError,
  );
  assertEquals(
    err.message,
    "neuron.toml: default_models[0].devices: must list exactly tensor_parallel (2) devices, got 1",
  );
});
