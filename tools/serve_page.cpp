#include "tools/serve_page.h"

namespace wgnn::tools {

const std::string& serve_page() {
  // The page sets body's data-state to "working", "done" or "error" (the
  // browser test waits on it).
  static const std::string page = R"PAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>wgnn: remove the background</title>
<style>
  body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
  #drop { border: 2px dashed #888; border-radius: 0.5rem; padding: 2.5rem 1rem; text-align: center; cursor: pointer; }
  #drop.over { background: #eef3ff; border-color: #36c; }
  #options label { margin-right: 1.5rem; }
  #status.error { color: #b00; white-space: pre-wrap; }
  #result { display: none; margin-top: 1rem; }
  #cutout {
    max-width: 100%; display: block;
    background-color: #fff;
    background-image: linear-gradient(45deg, #ccc 25%, transparent 25%), linear-gradient(-45deg, #ccc 25%, transparent 25%),
                      linear-gradient(45deg, transparent 75%, #ccc 75%), linear-gradient(-45deg, transparent 75%, #ccc 75%);
    background-size: 20px 20px; background-position: 0 0, 0 10px, 10px -10px, -10px 0;
  }
</style>
</head>
<body data-state="idle">
<h1>Remove the background</h1>
<div id="drop" tabindex="0">Drop a photo here, or click to choose one (PNG, JPEG, WebP or TIFF)
  <input id="file" type="file" accept="image/png,image/jpeg,image/webp,image/tiff" hidden>
</div>
<p id="options">
  <label><input type="checkbox" id="post_process"> clean the mask (hard edges)</label>
  <label><input type="checkbox" id="only_mask"> the mask alone</label>
</p>
<p id="status"></p>
<div id="result">
  <img id="cutout" alt="the cut-out">
  <p><a id="download" href="#" download="cutout.png">Download the PNG</a> <span id="info"></span></p>
</div>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const drop = $("drop"), input = $("file"), statusLine = $("status");
let lastUrl = null;

function say(text, error) {
  statusLine.textContent = text;
  statusLine.className = error ? "error" : "";
  document.body.dataset.state = error ? "error" : document.body.dataset.state;
}

async function send(file) {
  document.body.dataset.state = "working";
  $("result").style.display = "none";
  say("Cutting out " + file.name + " ...", false);
  const q = new URLSearchParams();
  if ($("post_process").checked) q.set("post_process", "1");
  if ($("only_mask").checked) q.set("only_mask", "1");
  const t0 = performance.now();
  let r;
  try {
    r = await fetch("/remove-bg?" + q.toString(), {
      method: "POST", body: file, headers: { "Content-Type": file.type || "application/octet-stream" } });
  } catch (e) {
    return say("The server did not answer: " + e, true);
  }
  if (!r.ok) {
    const text = (await r.text()).trim();
    return say(text || ("HTTP " + r.status), true);
  }
  const blob = await r.blob();
  if (lastUrl) URL.revokeObjectURL(lastUrl);
  lastUrl = URL.createObjectURL(blob);
  const img = $("cutout");
  await new Promise((ok, fail) => { img.onload = ok; img.onerror = () => fail(new Error("not an image")); img.src = lastUrl; })
    .catch((e) => say("The answer is not a PNG: " + e.message, true));
  if (document.body.dataset.state === "error") return;
  const a = $("download");
  a.href = lastUrl;
  a.download = file.name.replace(/\.[^.]*$/, "") + ($("only_mask").checked ? "_mask.png" : "_cutout.png");
  $("info").textContent = img.naturalWidth + " x " + img.naturalHeight + ", " +
      Math.round(performance.now() - t0) + " ms";
  $("result").style.display = "block";
  say("", false);
  document.body.dataset.state = "done";
}

drop.addEventListener("click", () => input.click());
drop.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") input.click(); });
input.addEventListener("change", () => { if (input.files.length) send(input.files[0]); input.value = ""; });
drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
drop.addEventListener("dragleave", () => drop.classList.remove("over"));
drop.addEventListener("drop", (e) => {
  e.preventDefault();
  drop.classList.remove("over");
  if (e.dataTransfer.files.length) send(e.dataTransfer.files[0]);
});
</script>
</body>
</html>
)PAGE";
  return page;
}

}  // namespace wgnn::tools
