/**
 * What the packages set up around the executable: the systemd unit, the sysusers entry,
 * the firewalld service and /etc/neuron/neuron.toml, checked with systemd's own tools where
 * this machine has them, and the node's behaviour under the unit's stop rules.
 */
import { assert, assertEquals, assertStringIncludes } from "../support/assert.ts";
import { startNeuron } from "../support/processes.ts";
import { lacking } from "../support/tools.ts";
import { loadConfig } from "../../src/config/mod.ts";

const RPM = new URL("../../rpm/", import.meta.url).pathname;
const UNIT = Deno.readTextFileSync(`${RPM}neuron.service`);

/** `Key=value` lines of one section of a unit file, later values last. */
function section(text: string, name: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  let current = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      current = header[1];
      continue;
    }
    if (current !== name) continue;
    const eq = line.indexOf("=");
    const key = line.slice(0, eq);
    out.set(key, [...(out.get(key) ?? []), line.slice(eq + 1)]);
  }
  return out;
}

Deno.test("neuron.service runs the node as WIRE.md specifies", () => {
  const service = section(UNIT, "Service");
  const one = (key: string) => service.get(key)?.join(" ");
  assertEquals(one("Type"), "simple");
  assertEquals(one("ExecStart"), "/usr/bin/neuron --config /etc/neuron/neuron.toml");
  assertEquals(one("Restart"), "on-failure");
  assertEquals(one("User"), "neuron");
  assertEquals(one("StateDirectory"), "neuron");
  assertEquals(one("TimeoutStartSec"), "1800");
  assertEquals(one("TimeoutStopSec"), "120");
  // SIGTERM to the node alone: it drains, then stops its own tensor-parallel workers.
  assertEquals(one("KillMode"), "mixed");
  assertEquals(section(UNIT, "Install").get("WantedBy"), ["multi-user.target"]);
});

Deno.test({
  name: "systemd-analyze verify accepts neuron.service",
  ignore: lacking("tests/delivery/service_test.ts, systemd-analyze verify", ["systemd-analyze"]),
  fn: async () => {
    const dir = Deno.makeTempDirSync();
    try {
      // verify checks that ExecStart's program exists: point it at an executable here.
      const exe = `${dir}/neuron`;
      Deno.writeTextFileSync(exe, "#!/bin/sh\nexit 0\n");
      Deno.chmodSync(exe, 0o755);
      Deno.writeTextFileSync(
        `${dir}/neuron.service`,
        UNIT.replace("ExecStart=/usr/bin/neuron ", `ExecStart=${exe} `),
      );
      const out = await new Deno.Command("systemd-analyze", {
        args: ["verify", "--man=no", `${dir}/neuron.service`],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
      assert(out.success, text);
      assertEquals(text.split("\n").filter((l) => l.includes("neuron.service")), [], text);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "systemd-analyze security rates neuron.service's sandbox 5 or less",
  ignore: lacking("tests/delivery/service_test.ts, systemd-analyze security", ["systemd-analyze"]),
  fn: async () => {
    const out = await new Deno.Command("systemd-analyze", {
      args: ["security", "--offline=true", "--no-pager", `${RPM}neuron.service`],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    const level = /Overall exposure level for neuron\.service: (\d+(?:\.\d+)?)/.exec(text);
    assert(level, text);
    assert(Number(level[1]) <= 5, `exposure ${level[1]} (at most 5):\n${text}`);
  },
});

Deno.test("the sandbox leaves the GPUs, V8's compiled code and the state directory usable", () => {
  const service = section(UNIT, "Service");
  // Each of these closes device access (ProtectClock= implies DeviceAllow=char-rtc r, which
  // turns the device policy into an allow list), hides /proc/driver/nvidia, remaps the
  // groups that open the GPU device nodes, or forbids the executable memory V8 compiles to.
  for (
    const key of [
      "PrivateDevices",
      "DevicePolicy",
      "DeviceAllow",
      "ProtectClock",
      "ProcSubset",
      "PrivateUsers",
      "MemoryDenyWriteExecute",
      "PrivateNetwork",
    ]
  ) {
    assertEquals(service.get(key), undefined, key);
  }
  assertEquals(service.get("ProtectSystem"), ["strict"]);
  assertEquals(service.get("StateDirectory"), ["neuron"], "the one writable tree");
  const families = service.get("RestrictAddressFamilies")?.join(" ").split(/\s+/) ?? [];
  // Serving, downloads, systemctl over D-Bus, NCCL's interface lookup.
  for (const family of ["AF_INET", "AF_INET6", "AF_UNIX", "AF_NETLINK"]) {
    assert(families.includes(family), `${family} in ${families}`);
  }
});

Deno.test({
  name: "systemd-sysusers creates user neuron in groups video and render",
  ignore: lacking("tests/delivery/service_test.ts, systemd-sysusers", ["systemd-sysusers"]),
  fn: async () => {
    const root = Deno.makeTempDirSync();
    try {
      Deno.mkdirSync(`${root}/etc`);
      Deno.writeTextFileSync(`${root}/etc/passwd`, "root:x:0:0:root:/root:/bin/sh\n");
      Deno.writeTextFileSync(`${root}/etc/group`, "root:x:0:\nvideo:x:39:\nrender:x:105:\n");
      const out = await new Deno.Command("systemd-sysusers", {
        args: [`--root=${root}`, `${RPM}neuron-sysusers.conf`],
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert(out.success, new TextDecoder().decode(out.stderr));
      const passwd = Deno.readTextFileSync(`${root}/etc/passwd`);
      assert(
        /^neuron:x:\d+:\d+:[^:]*:\/var\/lib\/neuron:\/sbin\/nologin$/m.test(passwd),
        passwd,
      );
      const group = Deno.readTextFileSync(`${root}/etc/group`);
      assert(/^video:x:39:neuron$/m.test(group), group);
      assert(/^render:x:105:neuron$/m.test(group), group);
    } finally {
      Deno.removeSync(root, { recursive: true });
    }
  },
});

Deno.test("the firewalld service helexa-neuron opens tcp 13131, the node's port", async () => {
  const xml = Deno.readTextFileSync(`${RPM}helexa-neuron-firewalld.xml`);
  assertStringIncludes(xml, "<short>helexa-neuron</short>");
  const ports = [...xml.matchAll(/<port\s+protocol="(\w+)"\s+port="(\d+)"\s*\/>/g)];
  assertEquals(ports.map((m) => `${m[1]}/${m[2]}`), ["tcp/13131"]);
  assertEquals(xml.match(/<port\b/g)?.length, 1);
  const { config } = await loadConfig(`${RPM}neuron.toml`);
  assertEquals(config.port, 13131);
});

Deno.test("/etc/neuron/neuron.toml loads and drains well inside TimeoutStopSec", async () => {
  const { config } = await loadConfig(`${RPM}neuron.toml`);
  const stop = Number(section(UNIT, "Service").get("TimeoutStopSec"));
  assert(config.shutdown_grace_secs * 2 <= stop, `${config.shutdown_grace_secs} s vs ${stop} s`);
  assertEquals(config.harness.native?.hf_cache, "/var/lib/neuron/hub", "inside StateDirectory");
});

Deno.test("as the unit runs it: JSON log lines, and SIGTERM exits 0 in time", async () => {
  const cache = Deno.makeTempDirSync();
  try {
    const node = await startNeuron(["--config", `${RPM}neuron.toml`], {
      NEURON_HOST: "127.0.0.1",
      NEURON_PORT: "0",
      NEURON_HARNESS__NATIVE__HF_CACHE: cache,
      NEURON_HARNESS__NATIVE__DEVICE: "cpu",
    });
    const health = await fetch(`${node.url}/health`);
    assertEquals(health.status, 200);
    await health.body?.cancel();
    const t0 = performance.now();
    node.kill("SIGTERM");
    assertEquals(await node.exited, 0);
    const seconds = (performance.now() - t0) / 1000;
    assert(seconds < Number(section(UNIT, "Service").get("TimeoutStopSec")), `${seconds} s`);
    assert(node.stderr.length > 0);
    for (const line of node.stderr) {
      const record = JSON.parse(line);
      assert(typeof record.level === "string" && typeof record.msg === "string", line);
    }
    assert(node.stderr.some((l) => JSON.parse(l).msg === "stopped"), node.stderr.join("\n"));
  } finally {
    Deno.removeSync(cache, { recursive: true });
  }
});
