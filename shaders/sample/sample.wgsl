// Token sampling: one workgroup of 256 invocations turns one logits row into
// one token id, with the semantics of pipeline/sampling.rs (its CPU reference):
// logit bias, penalties, then greedy, or temperature, top-k, top-p, min-p and
// an inverse-CDF draw over the kept tokens in ascending id order. With an
// allowed-token bitmask (constrained decoding), a token whose bit is clear
// gets key 0 as a banned one does, so no later step can pick it.
//
// Nothing is sorted. Logits become u32 keys with the same order (`order_key`),
// weights become integers q = floor(exp((z - z_max) / T) * 2^31), and masses
// are exact 64-bit integer sums (vec2<u32>: lo, hi), so a cut or a draw
// depends on the f32 `exp` alone, never on summation order. The top-k and
// top-p cuts are the largest key t whose count / mass of keys >= t reaches the
// target, found by a search that measures 8 probes per pass (~10 passes of
// the row instead of 32 for plain bisection). The draw: each invocation owns
// a contiguous id range, one invocation scans the 256 range masses to find
// the range that holds r = floor(u * W), and that range's owner scans it.
//
// Passes over the row: copy (+ bias, penalties), keys + argmax, weights,
// ~10 per active cut, draw. Greedy stops after the argmax.

// Params is the kernel's parameter block, declared once in Rust
// (kernel_params!) and put in front of these sources by the pipeline.
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;        // [logits_offset + vocab]
@group(0) @binding(2) var<storage, read> bias: array<u32>;          // [2 * n_bias]: id, bitcast<u32>(bias); ids distinct
@group(0) @binding(3) var<storage, read_write> hist: array<u32>;    // [2 + hist_cap]: len, next slot, ids[hist_cap] (a ring)
@group(0) @binding(4) var<storage, read> randoms: array<f32>;       // [> step]: u in [0, 1) per step
@group(0) @binding(5) var<storage, read_write> out_ids: array<u32>; // [> out_index]
@group(0) @binding(6) var<storage, read_write> work: array<u32>;    // [2 * vocab]: logit bits then keys; weights q
@group(0) @binding(7) var<storage, read> mask: array<u32>;          // [mask_offset + ceil(vocab / 32)] when masked: bit i % 32 of word i / 32 allows token i

const WG: u32 = 256u;
const NONE: u32 = 0xffffffffu;
const MASKED: f32 = -1e30;  // at or below: banned
const BANNED: f32 = -3.0e38; // what a ban writes (finite on purpose)
const Q_SCALE: f32 = 2147483648.0; // 2^31

var<private> lid: u32;
var<workgroup> red_a: array<u32, 256>;
var<workgroup> red_b: array<u32, 256>;
// Per probe j: count at 3j, mass lo at 3j + 1, mass hi at 3j + 2.
var<workgroup> acc: array<atomic<u32>, 24>;
// Values that thread 0 decides and everyone reads (uniformly where they
// steer a loop with barriers in it).
var<workgroup> wg_lo: u32;
var<workgroup> wg_hi: u32;
var<workgroup> wg_key: u32;
var<workgroup> wg_live: u32;
var<workgroup> wg_best: u32;
var<workgroup> wg_mass: vec2<u32>;
var<workgroup> wg_sel: u32;
var<workgroup> wg_r: vec2<u32>;
var<workgroup> wg_pre: vec2<u32>;
var<workgroup> wg_minq: u32;

fn order_key(z: f32) -> u32 {
    if (z <= MASKED) {
        return 0u;
    }
    let b = select(bitcast<u32>(z), 0u, z == 0.0);
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

// Whether token i may be picked (always, without a mask).
fn allowed(i: u32) -> bool {
    return p.masked == 0u || ((mask[p.mask_offset + (i >> 5u)] >> (i & 31u)) & 1u) != 0u;
}

fn key_value(k: u32) -> f32 {
    return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}

fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < b.x));
}

fn ge64(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.y > b.y || (a.y == b.y && a.x >= b.x);
}

// Adds to the 64-bit workgroup counter at acc[i], acc[i + 1]: the thread whose
// add wraps the low word carries, so the total is exact.
fn atomic_add64(i: u32, v: vec2<u32>) {
    let old = atomicAdd(&acc[i], v.x);
    let carry = select(0u, 1u, old + v.x < old);
    if (v.y + carry != 0u) {
        atomicAdd(&acc[i + 1u], v.y + carry);
    }
}

// ceil (ceil = true) or floor of f * w / 2^24, exactly: 16-bit limbs, each
// partial product split into halves so no column overflows.
fn scale24(f: u32, w: vec2<u32>, ceil: bool) -> vec2<u32> {
    let a = array<u32, 4>(w.x & 0xffffu, w.x >> 16u, w.y & 0xffffu, w.y >> 16u);
    let b0 = f & 0xffffu;
    let b1 = f >> 16u;
    var col = array<u32, 7>(0u, 0u, 0u, 0u, 0u, 0u, 0u);
    for (var i = 0u; i < 4u; i++) {
        let p0 = a[i] * b0;
        let p1 = a[i] * b1;
        col[i] += p0 & 0xffffu;
        col[i + 1u] += (p0 >> 16u) + (p1 & 0xffffu);
        col[i + 2u] += p1 >> 16u;
    }
    for (var k = 0u; k < 6u; k++) {
        col[k + 1u] += col[k] >> 16u;
        col[k] &= 0xffffu;
    }
    let r = vec2<u32>(
        (col[1] >> 8u) | (col[2] << 8u) | (col[3] << 24u),
        (col[3] >> 8u) | (col[4] << 8u) | (col[5] << 24u),
    );
    let rest = (col[0] | (col[1] & 0xffu)) != 0u;
    return add64(r, vec2<u32>(select(0u, 1u, ceil && rest), 0u));
}

// Adds, for each probe t[j], the count and mass of keys >= t[j] to acc.
fn measure(t: array<u32, 8>) {
    let n = p.vocab;
    var c = array<u32, 8>(0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u);
    var m: array<vec2<u32>, 8>;
    for (var i = lid; i < n; i += WG) {
        let k = work[i];
        if (k < t[0]) {
            continue;
        }
        let q = vec2<u32>(work[n + i], 0u);
        for (var j = 0u; j < 8u; j++) {
            if (k >= t[j]) {
                c[j] += 1u;
                m[j] = add64(m[j], q);
            }
        }
    }
    for (var j = 0u; j < 8u; j++) {
        if (c[j] != 0u) {
            atomicAdd(&acc[3u * j], c[j]);
            atomic_add64(3u * j + 1u, m[j]);
        }
    }
}

// The largest t in [lo0, hi0] whose count (by_mass false) or mass of keys
// >= t is at least `need`; the count / mass at lo0 must already reach it. On
// return wg_mass holds the mass at the result when a probe set it.
fn search(lo0: u32, hi0: u32, by_mass: bool, need: vec2<u32>) -> u32 {
    var lo = lo0;
    var hi = hi0;
    loop {
        if (lo >= hi) {
            break;
        }
        let span = hi - lo;
        let stride = span / 9u + select(0u, 1u, span % 9u != 0u);
        var t: array<u32, 8>;
        for (var j = 0u; j < 8u; j++) {
            t[j] = lo + min(stride * (j + 1u), span);
        }
        measure(t);
        workgroupBarrier();
        if (lid == 0u) {
            var nlo = lo;
            var nhi = t[0] - 1u;
            for (var j = 0u; j < 8u; j++) {
                let c = atomicLoad(&acc[3u * j]);
                let m = vec2<u32>(atomicLoad(&acc[3u * j + 1u]), atomicLoad(&acc[3u * j + 2u]));
                let ok = select(c >= need.x, ge64(m, need), by_mass);
                if (ok) {
                    nlo = t[j];
                    nhi = select(hi, t[min(j + 1u, 7u)] - 1u, j < 7u);
                    wg_mass = m;
                }
                atomicStore(&acc[3u * j], 0u);
                atomicStore(&acc[3u * j + 1u], 0u);
                atomicStore(&acc[3u * j + 2u], 0u);
            }
            wg_lo = nlo;
            wg_hi = nhi;
        }
        lo = workgroupUniformLoad(&wg_lo);
        hi = workgroupUniformLoad(&wg_hi);
    }
    return lo;
}

// Writes the result and appends it to the history ring (one invocation).
fn finish(id: u32) {
    out_ids[p.out_index] = id;
    let cap = p.hist_cap;
    if (cap > 0u) {
        let slot = hist[1] % cap;
        hist[2u + slot] = id;
        hist[1] = (slot + 1u) % cap;
        hist[0] = min(min(hist[0], cap) + 1u, cap);
    }
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32) {
    lid = li;
    let n = p.vocab;

    // 1. The adjusted logits z, in `work`: copy, bias, penalties.
    for (var i = li; i < n; i += WG) {
        work[i] = bitcast<u32>(logits[p.logits_offset + i]);
    }
    storageBarrier();
    for (var j = li; j < p.n_bias; j += WG) {
        let id = bias[2u * j];
        if (id < n) {
            let b = bitcast<f32>(bias[2u * j + 1u]);
            work[id] = bitcast<u32>(select(bitcast<f32>(work[id]) + b, BANNED, b <= MASKED));
        }
    }
    storageBarrier();
    if (p.penalties != 0u) {
        // One invocation per history slot; the first slot holding a token
        // counts its copies and applies the penalty once.
        let len = min(hist[0], p.hist_cap);
        for (var s = li; s < len; s += WG) {
            let t = hist[2u + s];
            var count = 0u;
            var first = true;
            for (var j = 0u; j < len; j++) {
                if (hist[2u + j] == t) {
                    count += 1u;
                    first = first && j >= s;
                }
            }
            if (t >= n || !first) {
                continue;
            }
            let z = bitcast<f32>(work[t]);
            if (z > MASKED) {
                let v = select(z * p.inv_rep, z * p.rep, z <= 0.0);
                work[t] = bitcast<u32>(v - (f32(count) * p.freq + p.presence));
            }
        }
    }
    storageBarrier();

    // 2. Keys in place of z (0 where the mask disallows), and the argmax:
    // largest key, lowest id.
    var bk = 0u;
    var bi = NONE;
    for (var i = li; i < n; i += WG) {
        let k = select(0u, order_key(bitcast<f32>(work[i])), allowed(i));
        work[i] = k;
        if (bi == NONE || k > bk) {
            bk = k;
            bi = i;
        }
    }
    red_a[li] = bk;
    red_b[li] = bi;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
        if (li < stride) {
            let ok = red_b[li + stride];
            let mine = red_b[li];
            let ka = red_a[li];
            let kb = red_a[li + stride];
            if (ok != NONE && (mine == NONE || kb > ka || (kb == ka && ok < mine))) {
                red_a[li] = kb;
                red_b[li] = ok;
            }
        }
        workgroupBarrier();
    }
    if (li == 0u) {
        wg_key = red_a[0];
        wg_best = red_b[0];
    }
    storageBarrier();
    let key_max = workgroupUniformLoad(&wg_key);
    if (p.greedy != 0u || key_max == 0u) {
        if (li == 0u) {
            finish(wg_best);
        }
        return;
    }

    // 3. Weights q, and the count and mass of the unbanned tokens.
    let z_max = key_value(key_max);
    var live = 0u;
    var mass = vec2<u32>(0u, 0u);
    for (var i = li; i < n; i += WG) {
        let k = work[i];
        var q = 0u;
        if (k != 0u) {
            q = u32(exp((key_value(k) - z_max) * p.inv_temp) * Q_SCALE);
            live += 1u;
            mass = add64(mass, vec2<u32>(q, 0u));
        }
        work[n + i] = q;
    }
    atomicAdd(&acc[0], live);
    atomic_add64(1u, mass);
    storageBarrier();
    workgroupBarrier();
    if (li == 0u) {
        wg_live = atomicLoad(&acc[0]);
        wg_mass = vec2<u32>(atomicLoad(&acc[1]), atomicLoad(&acc[2]));
        atomicStore(&acc[0], 0u);
        atomicStore(&acc[1], 0u);
        atomicStore(&acc[2], 0u);
        let m24 = p.min_p24;
        wg_minq = select(0u, scale24(m24, vec2<u32>(work[n + wg_best], 0u), true).x, m24 > 0u);
    }
    let n_live = workgroupUniformLoad(&wg_live);

    // 4. Top-k, then top-p over what top-k kept (wg_mass: its mass).
    var cut = 1u;
    if (p.top_k > 0u && p.top_k < n_live) {
        cut = search(1u, key_max, false, vec2<u32>(p.top_k, 0u));
    }
    if (p.top_p24 < (1u << 24u)) {
        if (li == 0u) {
            wg_r = scale24(p.top_p24, wg_mass, true);
        }
        let need = workgroupUniformLoad(&wg_r);
        cut = search(cut, key_max, true, need);
    }

    // 5. The draw: range masses, then the range that holds r.
    let min_q = wg_minq;
    let chunk = (n + WG - 1u) / WG;
    let a = min(li * chunk, n);
    let b = min(a + chunk, n);
    var part = vec2<u32>(0u, 0u);
    for (var i = a; i < b; i++) {
        let q = work[n + i];
        if (work[i] >= cut && q >= min_q) {
            part = add64(part, vec2<u32>(q, 0u));
        }
    }
    workgroupBarrier();
    red_a[li] = part.x;
    red_b[li] = part.y;
    workgroupBarrier();
    if (li == 0u) {
        var total = vec2<u32>(0u, 0u);
        for (var j = 0u; j < WG; j++) {
            total = add64(total, vec2<u32>(red_a[j], red_b[j]));
        }
        let u24 = min(u32(randoms[p.step] * 16777216.0), 0xffffffu);
        let r = scale24(u24, total, false);
        var sel = NONE;
        var pre = vec2<u32>(0u, 0u);
        var run = vec2<u32>(0u, 0u);
        for (var j = 0u; j < WG; j++) {
            let v = vec2<u32>(red_a[j], red_b[j]);
            if ((v.x | v.y) != 0u && ge64(r, run)) {
                sel = j;
                pre = run;
            }
            run = add64(run, v);
        }
        if (sel == NONE) {
            finish(wg_best); // nothing kept has weight: cannot happen, z_max's q is 2^31
        }
        wg_sel = sel;
        wg_r = r;
        wg_pre = pre;
    }
    workgroupBarrier();
    if (li == wg_sel) {
        let r = wg_r;
        var run = wg_pre;
        var pick = NONE;
        var last = NONE;
        for (var i = a; i < b; i++) {
            let q = work[n + i];
            if (work[i] >= cut && q >= min_q && q > 0u) {
                last = i;
                run = add64(run, vec2<u32>(q, 0u));
                if (!ge64(r, run)) {
                    pick = i;
                    break;
                }
            }
        }
        finish(select(pick, last, pick == NONE));
    }
}
