// The New job page's GPU-hour estimate for the chosen template and files. The rule is
// jobs.quotas.estimate_gpu_hours (keep the two the same): tasks = ceil(files / chunk); a video
// weighs one photo plus one photo per frame, spread evenly over the tasks; each task takes
// min(time limit, its files x seconds per file + model load); x GPUs per task.
// The counts come from the upload widget's "uploads:changed" event on document
// ({images, videos, frames}), else from the plain file input (the form without the widget);
// the numbers from the template cards' data attributes, the sentences (translated) from #quota.
(function () {
  "use strict";
  var box = document.getElementById("quota");
  var line = document.getElementById("estimate");
  var over = document.getElementById("estimate-over");
  var files = document.getElementById("id_targets");
  var folder = document.getElementById("id_target_folder");
  if (!box || !line || !over) return;
  var sent = null; // the upload widget's last counts: {images, videos, frames}

  function fill(text, values) {
    return text.replace(/\{(\w+)\}/g, function (m, key) { return key in values ? values[key] : m; });
  }

  function hours(h) {
    var text = h.toFixed(h >= 0.095 || h === 0 ? 1 : 2);
    return text.indexOf(".") < 0 ? text : text.replace(/0+$/, "").replace(/\.$/, "");
  }

  function whole(value) {
    var n = Math.floor(Number(value));
    return isFinite(n) && n > 0 ? n : 0;
  }

  /** 1000 -> "1,000", as the server writes counts. */
  function thousands(n) {
    return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  function estimate(card, n, frames) {
    var d = card.dataset;
    var chunk = Math.max(1, parseInt(d.chunk, 10) || 1), cap = parseFloat(d.cap) || Infinity;
    var perImage = parseFloat(d.perImage) || 0, load = parseFloat(d.load) || 0, gpus = parseInt(d.gpus, 10) || 0;
    var perFile = n ? (perImage * (n + frames)) / n : 0;
    var full = Math.floor(n / chunk), rest = n % chunk;
    var seconds = full * Math.min(cap, chunk * perFile + load) + (rest ? Math.min(cap, rest * perFile + load) : 0);
    return seconds * gpus / 3600;
  }

  /** {images, videos, frames} chosen: the widget's counts, else the plain input's files. */
  function counts() {
    if (sent) return sent;
    return { images: files && files.files ? files.files.length : 0, videos: 0, frames: 0 };
  }

  function update() {
    var checked = document.querySelector("input[name=template]:checked");
    var card = checked && checked.closest(".template-card");
    var c = counts(), n = c.images + c.videos;
    over.hidden = true;
    if (!card || (!n && !(folder && folder.value.trim()))) { line.hidden = true; return; }
    var d = card.dataset;
    var values = { template: d.name, count: thousands(n), per100: d.per100, images: thousands(c.images),
                   videos: thousands(c.videos), frames: thousands(c.frames) };
    if (!(parseInt(d.gpus, 10) > 0)) {
      line.textContent = fill(box.dataset.cpuText, values);
    } else if (n) {
      var need = estimate(card, n, c.frames);
      values.hours = hours(need);
      line.textContent = fill(c.videos && box.dataset.videoText ? box.dataset.videoText : box.dataset.filesText, values);
      if (box.dataset.gpuLeft !== undefined && need > parseFloat(box.dataset.gpuLeft)) {
        over.textContent = fill(box.dataset.overText, { left: box.dataset.gpuLeftText });
        over.hidden = false;
      }
    } else {
      line.textContent = fill(box.dataset.folderText, values);
    }
    line.hidden = false;
  }

  document.addEventListener("uploads:changed", function (e) {
    var d = (e && e.detail) || {};
    sent = { images: whole(d.images), videos: whole(d.videos), frames: whole(d.frames) };
    update();
  });
  document.addEventListener("change", function (e) {
    if (e.target === files) sent = null; // the plain input chosen again: its files count now
    if (e.target && (e.target.name === "template" || e.target === files || e.target === folder)) update();
  });
  if (folder) folder.addEventListener("input", update);
  update();
})();
