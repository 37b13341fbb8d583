/**
 * The helexa-neuron-<flavour> packages, built by rpmbuild from rpm/ exactly as `deno task
 * rpm` builds them, around a stand-in executable (deno compile needs a denort base this
 * machine cannot download). The stand-in links stub libcuda, cuBLAS, NCCL and NVML
 * libraries, so the packages prove that dlopened CUDA libraries never become requirements.
 */
import { assert, assertEquals, assertStringIncludes } from "../support/assert.ts";
import {
  buildRpm,
  buildStandIn,
  lintRpms,
  needsFallbackMacros,
  SPEC,
} from "../../rpm/build_rpms.ts";
import { ALL_FLAVOURS, type PackageFlavour } from "../../rpm/flavours.ts";
import { packageVersion } from "../../rpm/release.ts";
import { lacking } from "../support/tools.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const VERSION = packageVersion(ROOT);
const RELEASE = "0.1.20261130050409.gitabcdef0";
const CUDA_STUBS = [
  "cuda:libcuda.so.1",
  "cublas:libcublas.so.13",
  "nccl:libnccl.so.2",
  "nvidia-ml:libnvidia-ml.so.1",
];

async function sh(cmd: string, args: string[], opts: { cwd?: string } = {}): Promise<string> {
  const out = await new Deno.Command(cmd, { args, cwd: opts.cwd, stdout: "piped", stderr: "piped" })
    .output();
  const dec = new TextDecoder();
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")}:\n${dec.decode(out.stderr)}`);
  return dec.decode(out.stdout);
}

async function lines(cmd: string, args: string[]): Promise<string[]> {
  return (await sh(cmd, args)).split("\n").map((l) => l.trim()).filter(Boolean);
}

/** A stand-in executable whose ELF header needs libcuda, cuBLAS, NCCL and NVML. */
async function cudaLinkedStandIn(dir: string): Promise<string> {
  const stubs = `${dir}/stubs`;
  Deno.mkdirSync(stubs);
  Deno.writeTextFileSync(`${stubs}/stub.c`, "int neuron_stub;\n");
  for (const entry of CUDA_STUBS) {
    const [name, soname] = entry.split(":");
    await sh("gcc", [
      "-shared",
      "-fPIC",
      `-Wl,-soname,${soname}`,
      "-o",
      `${stubs}/lib${name}.so`,
      `${stubs}/stub.c`,
    ]);
  }
  const path = `${dir}/neuron`;
  await buildStandIn(path, [
    `-L${stubs}`,
    "-Wl,--no-as-needed",
    ...CUDA_STUBS.map((e) => `-l${e.split(":")[0]}`),
  ]);
  return path;
}

interface Built {
  dir: string;
  binary: string;
  fallbackMacros: boolean;
  rpms: Map<PackageFlavour, string>;
}

let built: Promise<Built> | null = null;
let scratch: string | null = null;

globalThis.addEventListener("unload", () => {
  if (scratch) Deno.removeSync(scratch, { recursive: true });
});

const NO_RPMBUILD = lacking("tests/delivery/rpm_test.ts, every test", ["rpmbuild", "rpm"]);

/** A test of the built packages that also needs the tools `needs`. */
function rpmTest(name: string, needs: string[], fn: () => Promise<void>): void {
  const ignore = NO_RPMBUILD || lacking(`tests/delivery/rpm_test.ts, "${name}"`, needs);
  Deno.test({ name, ignore, fn });
}

/** Builds the three packages once for every test of this file. */
function buildAll(): Promise<Built> {
  built ??= (async () => {
    const dir = Deno.makeTempDirSync({ prefix: "neuron-rpm-test-" });
    scratch = dir;
    const binary = await cudaLinkedStandIn(dir);
    const fallbackMacros = await needsFallbackMacros();
    const rpms = new Map<PackageFlavour, string>();
    for (const flavour of ALL_FLAVOURS) {
      rpms.set(
        flavour,
        await buildRpm({
          binary,
          flavour,
          version: VERSION,
          release: RELEASE,
          outDir: `${dir}/out`,
          fallbackMacros,
        }),
      );
    }
    return { dir, binary, fallbackMacros, rpms };
  })();
  return built;
}

const FILES = (flavour: string) => [
  "/etc/neuron",
  "/etc/neuron/neuron.toml",
  "/usr/bin/neuron",
  "/usr/lib/firewalld/services/helexa-neuron.xml",
  "/usr/lib/systemd/system/neuron.service",
  "/usr/lib/sysusers.d/neuron.conf",
  `/usr/share/licenses/helexa-neuron-${flavour}-${VERSION}`,
  `/usr/share/licenses/helexa-neuron-${flavour}-${VERSION}/LICENSE`,
];

rpmTest("each flavour's package: name, version, release, exactly its files", [], async () => {
  const { rpms } = await buildAll();
  for (const [flavour, rpm] of rpms) {
    assertEquals(
      await sh("rpm", ["-qp", "--qf", "%{NAME} %{VERSION} %{RELEASE} %{ARCH} %{LICENSE}", rpm]),
      `helexa-neuron-${flavour} ${VERSION} ${RELEASE} x86_64 MIT`,
    );
    assertEquals((await lines("rpm", ["-qlp", rpm])).sort(), FILES(flavour).sort(), flavour);
    const attrs = await lines("rpm", [
      "-qp",
      "--qf",
      "[%{FILENAMES} %{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILEFLAGS:fflags}\n]",
      rpm,
    ]);
    assert(attrs.includes("/etc/neuron/neuron.toml -rw-r----- root:neuron cn"), attrs.join("\n"));
    assert(attrs.includes("/usr/bin/neuron -rwxr-xr-x root:root"), attrs.join("\n"));
  }
});

rpmTest("the flavours conflict with each other and all provide helexa-neuron", [], async () => {
  const { rpms } = await buildAll();
  for (const [flavour, rpm] of rpms) {
    const others = ALL_FLAVOURS.filter((f) => f !== flavour).map((f) => `helexa-neuron-${f}`);
    assertEquals((await lines("rpm", ["-qp", "--conflicts", rpm])).sort(), others);
    const provides = await lines("rpm", ["-qp", "--provides", rpm]);
    assert(provides.includes(`helexa-neuron = ${VERSION}-${RELEASE}`), provides.join("\n"));
    assert(provides.includes(`helexa-neuron-${flavour} = ${VERSION}-${RELEASE}`));
  }
});

rpmTest("no package requires the dlopened CUDA libraries, though the executable links them", [
  "/usr/lib/rpm/elfdeps",
], async () => {
  const { binary, rpms } = await buildAll();
  const elf = await lines("/usr/lib/rpm/elfdeps", ["--requires", binary]);
  for (const entry of CUDA_STUBS) {
    const soname = entry.split(":")[1];
    assert(elf.some((r) => r.startsWith(soname)), `the stand-in needs ${soname}: ${elf}`);
  }
  for (const [flavour, rpm] of rpms) {
    const requires = await lines("rpm", ["-qp", "--requires", rpm]);
    const cuda = requires.filter((r) => /cuda|cublas|nccl|nvidia/i.test(r));
    assertEquals(cuda, [], flavour);
    // Beyond rpmlib features, the shell of the scriptlets and the C library: exactly these.
    const declared = requires.filter((r) =>
      !/^(rpmlib\(|lib[\w.+-]*\.so|rtld\(|\/bin\/sh$|config\()/.test(r)
    );
    assertEquals(declared.sort(), ["firewalld-filesystem", "systemd", "systemd", "systemd"]);
  }
});

rpmTest(
  "scriptlets: enable on install, stop on removal, restart on upgrade, reload firewalld",
  [],
  async () => {
    const { rpms } = await buildAll();
    for (const [flavour, rpm] of rpms) {
      const scripts = await sh("rpm", ["-qp", "--scripts", rpm]);
      const sections = scripts.split(/^(?=\w+ scriptlet)/m).filter(Boolean);
      assertEquals(
        sections.map((s) => s.split(" ")[0]),
        ["postinstall", "preuninstall", "postuninstall"],
        flavour,
      );
      assertStringIncludes(sections[0], "install-system-units neuron.service");
      assertStringIncludes(sections[0], "firewall-cmd --reload");
      assertStringIncludes(sections[1], "remove-system-units neuron.service");
      assertStringIncludes(sections[2], "mark-restart-system-units neuron.service");
    }
  },
);

rpmTest(
  "the payload is the executable and rpm/'s files, byte for byte",
  ["rpm2cpio", "cpio"],
  async () => {
    const { dir, binary, rpms } = await buildAll();
    const root = `${dir}/payload`;
    Deno.mkdirSync(root);
    const cpio = await new Deno.Command("sh", {
      args: ["-c", `rpm2cpio "$0" | cpio -idm --quiet`, rpms.get("hopper")!],
      cwd: root,
      stderr: "piped",
    }).output();
    assert(cpio.success, new TextDecoder().decode(cpio.stderr));
    const same = (a: string, b: string) =>
      assertEquals(Deno.readFileSync(`${root}${a}`), Deno.readFileSync(b), a);
    same("/usr/bin/neuron", binary);
    same("/usr/lib/systemd/system/neuron.service", `${ROOT}rpm/neuron.service`);
    same("/usr/lib/sysusers.d/neuron.conf", `${ROOT}rpm/neuron-sysusers.conf`);
    same("/usr/lib/firewalld/services/helexa-neuron.xml", `${ROOT}rpm/helexa-neuron-firewalld.xml`);
    same("/etc/neuron/neuron.toml", `${ROOT}rpm/neuron.toml`);
  },
);

rpmTest("rpmlint finds no errors in the spec or the packages", ["rpmlint"], async () => {
  const { rpms, fallbackMacros } = await buildAll();
  for (const flavour of ALL_FLAVOURS) {
    const lint = await lintRpms(
      { flavour, version: VERSION, release: RELEASE },
      flavour === "ada" ? [...rpms.values()] : [],
      fallbackMacros,
    );
    assertEquals(lint.errors, 0, lint.output);
    assertStringIncludes(lint.output, "1 specfiles checked");
  }
});

rpmTest("the spec refuses an unknown flavour or a missing define", ["rpmspec"], async () => {
  const { dir, binary, fallbackMacros } = await buildAll();
  let message = "";
  try {
    await buildRpm({
      binary,
      flavour: "ampere" as PackageFlavour,
      version: VERSION,
      release: RELEASE,
      outDir: `${dir}/refused`,
      fallbackMacros,
    });
  } catch (err) {
    message = (err as Error).message;
  }
  assertStringIncludes(message, "unknown neuron_flavour ampere");
  assertEquals([...Deno.readDirSync(dir)].some((e) => e.name === "refused"), false);
  const parse = await new Deno.Command("rpmspec", {
    args: ["-q", "--define", "neuron_flavour ada", "--define", `neuron_version ${VERSION}`, SPEC],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert(!parse.success);
  assertStringIncludes(new TextDecoder().decode(parse.stderr), "define neuron_release");
});
