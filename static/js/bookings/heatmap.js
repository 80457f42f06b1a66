/**
 * Book GPUs: picking the start from the heat map or a suggestion.
 *
 * Every heat-map cell and suggestion is a link `?start=YYYY-MM-DDTHH:MM#when` (the page prefills the
 * form from it without JavaScript). Here a click instead sets "at a time I choose" and the time in
 * the form, keeping what was typed, and says so in a live region. The grid is one stop in the Tab
 * order; the arrow keys move between hours (left/right) and days (up/down), Home/End to the day's
 * first and last hour, Enter or Space picks.
 */
export function setUpStartPicker(doc, form) {
  const startAt = form.querySelector("input[name=start_at]");
  const radios = Array.from(form.querySelectorAll("input[name=start]"));
  const box = doc.getElementById("start-at-box");
  const picked = doc.getElementById("picked");

  const showStartAt = () => {
    const choice = radios.find((r) => r.checked);
    if (box) box.hidden = !choice || choice.value !== "at";
  };
  radios.forEach((r) => r.addEventListener("change", showStartAt));
  showStartAt();

  const pick = (link) => {
    const value = link.getAttribute("data-start");
    if (!value || !startAt) return;
    startAt.value = value;
    const at = radios.find((r) => r.value === "at");
    if (at) at.checked = true;
    showStartAt();
    for (const other of doc.querySelectorAll("[data-start].is-picked")) {
      other.classList.remove("is-picked");
      other.removeAttribute("aria-current");
    }
    link.classList.add("is-picked");
    link.setAttribute("aria-current", "true");
    if (picked) picked.textContent = (picked.getAttribute("data-template") || "{when}").replace("{when}", value.replace("T", " "));
  };

  for (const link of doc.querySelectorAll("a[data-start]")) {
    link.addEventListener("click", (ev) => {
      ev.preventDefault();
      pick(link);
    });
  }
  for (const grid of doc.querySelectorAll("[data-heatmap] table")) rovingGrid(grid, pick);
}

function rovingGrid(grid, pick) {
  const rows = Array.from(grid.tBodies[0].rows).map((tr) => Array.from(tr.querySelectorAll("a.hm-cell")));
  if (!rows.length || !rows[0].length) return;
  const all = rows.flat();
  all.forEach((cell) => cell.setAttribute("tabindex", "-1"));
  rows[0][0].setAttribute("tabindex", "0");
  const moveTo = (day, hour) => {
    const d = (day + rows.length) % rows.length;
    const h = Math.max(0, Math.min(rows[d].length - 1, hour));
    all.forEach((cell) => cell.setAttribute("tabindex", "-1"));
    rows[d][h].setAttribute("tabindex", "0");
    rows[d][h].focus();
  };
  grid.addEventListener("keydown", (ev) => {
    const cell = ev.target.closest && ev.target.closest("a.hm-cell");
    if (!cell) return;
    const day = Number(cell.getAttribute("data-day"));
    const hour = Number(cell.getAttribute("data-hour"));
    const moves = { ArrowLeft: [day, hour - 1], ArrowRight: [day, hour + 1], ArrowUp: [day - 1, hour],
                    ArrowDown: [day + 1, hour], Home: [day, 0], End: [day, 23] };
    if (moves[ev.key]) {
      ev.preventDefault();
      moveTo(...moves[ev.key]);
    } else if (ev.key === " ") {
      ev.preventDefault();
      pick(cell);
    }
  });
}
