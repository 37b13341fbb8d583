import { assert, assertEquals } from "../tests/support/assert.ts";
import { isEmbedded, parseEmbeddedFiles } from "./embedded_files.ts";

const OUTPUT = `Compile main.ts to dist/neuron

Embedded Files

neuron
├─┬ .deno_compile_node_modules (7.72MB - 7.64MB unique)
│ └─┬ localhost (7.72MB - 7.64MB unique)
│   └── hono/4.13.19/* (1.27MB)
├── deno.json (1.16KB)
├─┬ kernels (12.4MB)
│ └─┬ build (12.4MB)
│   ├── libneuron_cpu.so (280.91KB)
│   ├── sm_89/* (3.53MB)
│   └─┬ sm_90 (3.65MB)
│     ├── matvec.ptx (1.5MB)
│     └── link.ptx --> kernels/build/sm_90/matvec.ptx
└─┬ \x1b[1msrc\x1b[0m (1.26MB)
  └── common/build_info.json (224B)

Files: 21.69MB
error: Writing deno compile executable to temporary file
`;

Deno.test("the embedded-file tree: files, whole directories, joined chains, symlinks", () => {
  const tree = parseEmbeddedFiles(OUTPUT);
  assert(tree !== null);
  assertEquals([...tree.files].sort(), [
    "deno.json",
    "kernels/build/libneuron_cpu.so",
    "kernels/build/sm_90/link.ptx",
    "kernels/build/sm_90/matvec.ptx",
    "src/common/build_info.json",
  ]);
  assertEquals([...tree.wholeDirs].sort(), [
    ".deno_compile_node_modules/localhost/hono/4.13.19",
    "kernels/build/sm_89",
  ]);
  assert(isEmbedded(tree, "kernels/build/sm_89/attention.cubin"), "inside a whole directory");
  assert(!isEmbedded(tree, "kernels/build/sm_90/stamp"), "a directory shown in part");
  assert(!isEmbedded(tree, "kernels/build/sm_8"), "a prefix is not a directory");
  assert(!isEmbedded(tree, "main.ts"));
});

Deno.test("output without the tree (deno compile failed before embedding) parses to null", () => {
  assertEquals(parseEmbeddedFiles('error: Module not found "file:///x/main.ts".'), null);
});
