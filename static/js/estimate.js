// The New job page's GPU-hour estimate for the chosen template and files. The rule is
// jobs.quotas.estimate_gpu_hours (keep the two the same): tasks = ceil(files / chunk); each task
// takes min(time limit, its images x seconds per image + model load); x GPUs per task.
// The numbers come from the template cards' data attributes, the sentences (translated) from #quota.
(function () {
  "use strict";
  var box = document.getElementById("quota");
  var line = document.getElementById("estimate");
  var over = document.getElementById("estimate-over");
  var files = document.getElementById("id_targets");
  var folder = document.getElementById("id_target_folder");
  if (!box || !line || !over) return;

  function fill(text, values) {
    return text.replace(/\{(\w+)\}/g, function (m, key) { return key in values ? values[key] : m; });
  }

  function hours(h) {
    var text = h.toFixed(h >= 0.095 || h === 0 ? 1 : 2);
    return text.indexOf(".") < 0 ? text : text.replace(/0+$/, "").replace(/\.$/, "");
  }

  function estimate(card, n) {
    var d = card.dataset;
    var chunk = Math.max(1, parseInt(d.chunk, 10) || 1), cap = parseFloat(d.cap) || Infinity;
    var perImage = parseFloat(d.perImage) || 0, load = parseFloat(d.load) || 0, gpus = parseInt(d.gpus, 10) || 0;
    var full = Math.floor(n / chunk), rest = n % chunk;
    var seconds = full * Math.min(cap, chunk * perImage + load) + (rest ? Math.min(cap, rest * perImage + load) : 0);
    return seconds * gpus / 3600;
  }

  function update() {
    var checked = document.querySelector("input[name=template]:checked");
    var card = checked && checked.closest(".template-card");
    var n = files && files.files ? files.files.length : 0;
    over.hidden = true;
    if (!card || (!n && !(folder && folder.value.trim()))) { line.hidden = true; return; }
    var d = card.dataset, values = { template: d.name, count: n, per100: d.per100 };
    if (!(parseInt(d.gpus, 10) > 0)) {
      line.textContent = fill(box.dataset.cpuText, values);
    } else if (n) {
      var need = estimate(card, n);
      values.hours = hours(need);
      line.textContent = fill(box.dataset.filesText, values);
      if (box.dataset.gpuLeft !== undefined && need > parseFloat(box.dataset.gpuLeft)) {
        over.textContent = fill(box.dataset.overText, { left: box.dataset.gpuLeftText });
        over.hidden = false;
      }
    } else {
      line.textContent = fill(box.dataset.folderText, values);
    }
    line.hidden = false;
  }

  document.addEventListener("change", function (e) {
    if (e.target && (e.target.name === "template" || e.target === files || e.target === folder)) update();
  });
  if (folder) folder.addEventListener("input", update);
  update();
})();
