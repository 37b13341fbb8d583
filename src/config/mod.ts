/** neuron.toml: schema, loading with `NEURON_*` overrides, and the hub cache location. */
export { ConfigError } from "./errors.ts";
export { loadConfig, type LoadedConfig, validate } from "./load.ts";
export { resolveHfHome, resolveHubCache, resolveTokenPath } from "./hub_cache.ts";
export {
  type Config,
  configSchema,
  type CudaConfig,
  type HarnessEntry,
  type HttpConfig,
  NATIVE_NAMES,
  type NativeConfig,
  nativeConfig,
  type SourceConfig,
} from "./schema.ts";
export { type ModelSpec, modelSpecBodySchema, modelSpecConfigSchema } from "./model_spec.ts";
