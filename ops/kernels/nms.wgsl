// wgnn.nms_select (ops/dynamic.cpp): ONNX NonMaxSuppression's greedy
// selection, one workgroup per (batch, class). Candidates are taken in
// order of score, highest first (equal scores: the lower box index first),
// only scores above the threshold when has_score_threshold; a candidate is
// kept unless its IoU with a box kept before exceeds iou_threshold; at most
// max_out are kept. sel[pair * max_out + t] = the t-th kept box,
// counts[pair] = how many. The next candidate is found by a scan for the
// best one after the last (no sort, no scratch), the workgroup's
// invocations each over every WG-th box, then a tree reduction.
// Boxes are [y1, x1, y2, x2] (corners in either order), or
// [x_center, y_center, width, height] when center_point_box.
const WG: u32 = 64u;

{{PARAMS}}

@group(0) @binding(0) var<storage, read_write> sel: array<i32>;
@group(0) @binding(1) var<storage, read_write> counts: array<u32>;
@group(0) @binding(2) var<uniform> params: Params;
@group(0) @binding(3) var<storage, read> boxes: array<f32>;
@group(0) @binding(4) var<storage, read> scores: array<f32>;
@group(0) @binding(5) var<storage, read> thresholds: array<f32>;  // iou, score

// [x_min, x_max, y_min, y_max] of box i of batch b.
fn extent(b: u32, i: u32) -> vec4<f32> {
  let at = (b * params.boxes + i) * 4u;
  let v = vec4<f32>(boxes[at], boxes[at + 1u], boxes[at + 2u], boxes[at + 3u]);
  if (params.center_point_box != 0u) {
    return vec4<f32>(v.x - v.z / 2.0, v.x + v.z / 2.0, v.y - v.w / 2.0, v.y + v.w / 2.0);
  }
  return vec4<f32>(min(v.y, v.w), max(v.y, v.w), min(v.x, v.z), max(v.x, v.z));
}

fn suppresses(b: u32, i: u32, j: u32, iou_threshold: f32) -> bool {
  let p = extent(b, i);
  let q = extent(b, j);
  let x0 = max(p.x, q.x);
  let x1 = min(p.y, q.y);
  if (x1 <= x0) {
    return false;
  }
  let y0 = max(p.z, q.z);
  let y1 = min(p.w, q.w);
  if (y1 <= y0) {
    return false;
  }
  let inter = (x1 - x0) * (y1 - y0);
  let a1 = (p.y - p.x) * (p.w - p.z);
  let a2 = (q.y - q.x) * (q.w - q.z);
  let uni = a1 + a2 - inter;
  if (inter <= 0.0 || a1 <= 0.0 || a2 <= 0.0 || uni <= 0.0) {
    return false;
  }
  return inter / uni > iou_threshold;
}

var<workgroup> red_s: array<f32, WG>;
var<workgroup> red_i: array<i32, WG>;
var<workgroup> prev_s: f32;
var<workgroup> prev_i: i32;
var<workgroup> kept: u32;
var<workgroup> done: u32;

// Whether candidate (s, i) comes before (t, j): a higher score, or the same and a lower index.
fn before(s: f32, i: i32, t: f32, j: i32) -> bool {
  return i >= 0 && (j < 0 || s > t || (s == t && i < j));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let pair = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
  if (pair >= params.batches * params.classes) {
    return;
  }
  let b = pair / params.classes;
  let srow = pair * params.boxes;
  let iou_threshold = thresholds[0];
  let score_threshold = thresholds[1];
  if (lid == 0u) {
    kept = 0u;
    prev_i = -1;
    prev_s = 0.0;
    done = select(0u, 1u, params.max_out == 0u);
  }
  loop {
    if (workgroupUniformLoad(&done) != 0u) {
      break;
    }
    // The best candidate after the last one, each invocation over every WG-th box.
    let ps = prev_s;
    let pi = prev_i;
    var best = -1;
    var best_s = 0.0;
    for (var j = lid; j < params.boxes; j += WG) {
      let s = scores[srow + j];
      if (params.has_score_threshold != 0u && !(s > score_threshold)) {
        continue;
      }
      if (pi >= 0 && !(s < ps || (s == ps && i32(j) > pi))) {
        continue;
      }
      if (best < 0 || s > best_s) {
        best = i32(j);
        best_s = s;
      }
    }
    red_s[lid] = best_s;
    red_i[lid] = best;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
      if (lid < stride && before(red_s[lid + stride], red_i[lid + stride], red_s[lid], red_i[lid])) {
        red_s[lid] = red_s[lid + stride];
        red_i[lid] = red_i[lid + stride];
      }
      workgroupBarrier();
    }
    if (lid == 0u) {
      let c = red_i[0];
      if (c < 0) {
        done = 1u;
      } else {
        prev_i = c;
        prev_s = red_s[0];
        var keep = true;
        for (var t = 0u; t < kept; t++) {
          if (suppresses(b, u32(c), u32(sel[pair * params.max_out + t]), iou_threshold)) {
            keep = false;
            break;
          }
        }
        if (keep) {
          sel[pair * params.max_out + kept] = c;
          kept += 1u;
          if (kept >= params.max_out) {
            done = 1u;
          }
        }
      }
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    counts[pair] = kept;
  }
}
