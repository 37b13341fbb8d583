/**
 * Where the kernels' PTX and cubins come from: `kernels/build/sm_<N>/` (built by `deno
 * task kernels:cuda`), read through the project's asset resolution (src/common/assets.ts),
 * so the same reads find them in the checkout under `deno run` and inside the executable
 * that `deno task compile` makes.
 */

import { AssetError, assetPath, readAsset } from "../../common/assets.ts";
import { errorMessage } from "../../common/errors.ts";
import { CudaUnavailableError } from "./errors.ts";
import { type FlavourManifest, FLAVOURS } from "../../../kernels/cuda/manifest.ts";

export type { FlavourManifest };

/** The bytes of `file` of `flavour`'s build. */
export function readKernelAsset(flavour: string, file: string): Uint8Array {
  try {
    return readAsset(`kernels/build/${flavour}/${file}`);
  } catch (err) {
    if (!(err instanceof AssetError)) throw err;
    throw new CudaUnavailableError(errorMessage(err), { cause: err });
  }
}

/** Flavours whose build is present. */
export function availableFlavours(): string[] {
  return FLAVOURS.map((f) => f.name).filter((name) => {
    try {
      Deno.statSync(assetPath(`kernels/build/${name}/manifest.json`));
      return true;
    } catch {
      return false;
    }
  });
}

export function readManifest(flavour: string): FlavourManifest {
  return JSON.parse(new TextDecoder().decode(readKernelAsset(flavour, "manifest.json")));
}
