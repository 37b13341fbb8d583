/**
 * The scale searches behind ggml's k-quant reference quantizers (ggml-quants.c:
 * `make_qx_quants`, `make_q3_quants`, `make_qkx2_quants`): each picks a sub-block scale
 * (and min) that minimises a weighted error, and writes the chosen integer levels to L.
 */

const f = Math.fround;

/** Below this magnitude a group counts as all zero (GROUP_MAX_EPS). */
const GROUP_MAX_EPS = 1e-15;

/** ggml's `nearest_int`: round half to even of an f32 value. */
export function nearestInt(v: number): number {
  const x = f(v);
  const r = Math.round(x);
  return r - x === 0.5 && (r & 1) !== 0 ? r - 1 : r;
}

function clamp(v: number, lo: number, hi: number): number {
  return v < lo ? lo : v > hi ? hi : v;
}

/** The value of largest magnitude among x[o..o+n), sign kept (0 for an all-zero group). */
function signedAbsMax(x: Float32Array, o: number, n: number): number {
  let amax = 0;
  let max = 0;
  for (let i = 0; i < n; i++) {
    const ax = Math.abs(x[o + i]);
    if (ax > amax) {
      amax = ax;
      max = x[o + i];
    }
  }
  return amax < GROUP_MAX_EPS ? 0 : max;
}

/**
 * Symmetric levels in [0, 2*nmax) for x[o..o+n), weighted by x^2 (`make_qx_quants` with
 * rmse_type 1): tries 19 scales around the one mapping the extreme value to -nmax.
 */
export function makeQxQuants(
  n: number,
  nmax: number,
  x: Float32Array,
  o: number,
  L: Int32Array,
  lo: number,
): number {
  const max = signedAbsMax(x, o, n);
  if (max === 0) {
    L.fill(0, lo, lo + n);
    return 0;
  }
  const levels = (iscale: number): [number, number] => {
    let sumlx = 0;
    let suml2 = 0;
    for (let i = 0; i < n; i++) {
      const v = x[o + i];
      const l = clamp(nearestInt(iscale * v), -nmax, nmax - 1);
      const w = v * v;
      sumlx += w * v * l;
      suml2 += w * l * l;
    }
    return [sumlx, suml2];
  };
  const store = (iscale: number): void => {
    for (let i = 0; i < n; i++) {
      L[lo + i] = nmax + clamp(nearestInt(iscale * x[o + i]), -nmax, nmax - 1);
    }
  };
  let iscale = f(-nmax / max);
  store(iscale);
  let [sumlx, suml2] = levels(iscale);
  let scale = suml2 ? sumlx / suml2 : 0;
  let best = scale * sumlx;
  for (let is = -9; is <= 9; is++) {
    if (is === 0) continue;
    iscale = f(-(nmax + 0.1 * is) / max);
    [sumlx, suml2] = levels(iscale);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      store(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return f(scale);
}

/**
 * Signed 3-bit levels for Q3_K (`make_q3_quants` with do_rmse): start from the extreme
 * value's scale, then move single levels while that lowers the x^2-weighted error.
 * L receives levels offset by nmax, in [0, 2*nmax).
 */
export function makeQ3Quants(
  n: number,
  nmax: number,
  x: Float32Array,
  o: number,
  L: Int32Array,
  lo: number,
): number {
  const max = signedAbsMax(x, o, n);
  if (max === 0) {
    L.fill(0, lo, lo + n);
    return 0;
  }
  const iscale = f(-nmax / max);
  let sumlx = 0;
  let suml2 = 0;
  for (let i = 0; i < n; i++) {
    const v = x[o + i];
    const l = clamp(nearestInt(iscale * v), -nmax, nmax - 1);
    L[lo + i] = l;
    const w = v * v;
    sumlx += w * v * l;
    suml2 += w * l * l;
  }
  for (let itry = 0; itry < 5; itry++) {
    let changed = 0;
    for (let i = 0; i < n; i++) {
      const v = x[o + i];
      const w = v * v;
      let slx = sumlx - w * v * L[lo + i];
      if (slx <= 0) continue;
      let sl2 = suml2 - w * L[lo + i] * L[lo + i];
      const l = clamp(nearestInt((v * sl2) / slx), -nmax, nmax - 1);
      if (l === L[lo + i]) continue;
      slx += w * v * l;
      sl2 += w * l * l;
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[lo + i] = l;
        sumlx = slx;
        suml2 = sl2;
        changed++;
      }
    }
    if (!changed) break;
  }
  for (let i = 0; i < n; i++) L[lo + i] += nmax;
  return f(suml2 > 0 ? sumlx / suml2 : 0);
}

/**
 * Asymmetric levels in [0, nmax] with a min (`make_qkx2_quants`): fits scale and min by
 * weighted least squares for nstep + 1 candidate scales, keeping the lowest-error fit.
 * Returns [scale, -min]; L receives the levels.
 */
export function makeQkx2Quants(
  n: number,
  nmax: number,
  x: Float32Array,
  o: number,
  weights: Float32Array,
  L: Int32Array,
  lo: number,
  rmin: number,
  rdelta: number,
  nstep: number,
  useMad: boolean,
): [number, number] {
  let min = x[o];
  let max = x[o];
  let sumW = weights[0];
  let sumX = sumW * x[o];
  for (let i = 1; i < n; i++) {
    const v = x[o + i];
    if (v < min) min = v;
    if (v > max) max = v;
    sumW += weights[i];
    sumX += weights[i] * v;
  }
  if (min > 0) min = 0;
  if (max === min) {
    L.fill(0, lo, lo + n);
    return [0, -min];
  }
  const error = (scale: number, mn: number, levels: (i: number) => number): number => {
    let e = 0;
    for (let i = 0; i < n; i++) {
      const diff = f(scale * levels(i) + mn - x[o + i]);
      e += weights[i] * (useMad ? Math.abs(diff) : diff * diff);
    }
    return e;
  };
  let iscale = f(nmax / (max - min));
  let scale = f(1 / iscale);
  for (let i = 0; i < n; i++) {
    L[lo + i] = clamp(nearestInt(iscale * (x[o + i] - min)), 0, nmax);
  }
  let bestError = error(scale, min, (i) => L[lo + i]);
  const aux = new Int32Array(n);
  for (let is = 0; is <= nstep; is++) {
    iscale = f((rmin + rdelta * is + nmax) / (max - min));
    let sumL = 0;
    let sumL2 = 0;
    let sumXL = 0;
    for (let i = 0; i < n; i++) {
      const l = clamp(nearestInt(iscale * (x[o + i] - min)), 0, nmax);
      aux[i] = l;
      const w = weights[i];
      sumL += w * l;
      sumL2 += w * l * l;
      sumXL += w * l * x[o + i];
    }
    const D = sumW * sumL2 - sumL * sumL;
    if (D <= 0) continue;
    let thisScale = f((sumW * sumXL - sumX * sumL) / D);
    let thisMin = f((sumL2 * sumX - sumL * sumXL) / D);
    if (thisMin > 0) {
      thisMin = 0;
      thisScale = f(sumXL / sumL2);
    }
    const e = error(thisScale, thisMin, (i) => aux[i]);
    if (e < bestError) {
      L.set(aux, lo);
      bestError = e;
      scale = thisScale;
      min = thisMin;
    }
  }
  return [scale, -min];
}
