// Before and after in one frame (#ba-view): the "after" pane lies over the "before" one and is
// clipped left of the divider, so the left part shows the original and the right part the result.
// The divider follows the mouse, a finger or a pen (pointer events) and, focused, the arrow keys
// (role=slider). Zoom: fit, 100 % (one pixel of the photo per CSS pixel) or 200 %; zoomed in,
// dragging the picture moves it. The divider stays where it is in the frame while zoomed, so the
// clip is worked out in the zoomed picture's own pixels.

const clamp = (value, low, high) => Math.min(high, Math.max(low, value));

// the divider moves this many percent per arrow key, and BIG_STEP with Shift or Page Up/Down
const STEP = 1, BIG_STEP = 10;
// the frame is never taller than this share of the window, nor lower than MIN_HEIGHT pixels
const MAX_HEIGHT_SHARE = 0.65, MIN_HEIGHT = 240;

export class Compare {
  /** `root`: #gallery, holding #ba-view, #ba-canvas, #ba-after, #ba-divider and #gallery-tools. */
  constructor(root) {
    this.root = root;
    this.view = root.querySelector("#ba-view");
    this.canvas = root.querySelector("#ba-canvas");
    this.after = root.querySelector("#ba-after");
    this.divider = root.querySelector("#ba-divider");
    this.tools = root.querySelector("#gallery-tools");
    this.media = Array.from(this.canvas.querySelectorAll("img, video"));
    this.valueWord = root.getAttribute("data-word-divider-value") || "{n}";
    this.mode = "slider";
    this.zoom = "fit";
    this.split = 50; // percent of the frame's width, from the left, that shows "before"
    this.scale = 0; // CSS pixels per pixel of the photo; 0 until first laid out
    this.panX = 0;
    this.panY = 0;
    this.drag = null;
  }

  start() {
    this.tools.hidden = false;
    this.divider.hidden = false;
    for (const button of this.tools.querySelectorAll("[data-view]")) {
      button.addEventListener("click", () => this.setView(button.getAttribute("data-view")));
    }
    for (const button of this.tools.querySelectorAll("[data-zoom]")) {
      button.addEventListener("click", () => this.setZoom(button.getAttribute("data-zoom")));
    }
    for (const m of this.media) {
      m.addEventListener(m.tagName === "VIDEO" ? "loadedmetadata" : "load", () => this.layout());
    }
    if ("ResizeObserver" in window) new ResizeObserver(() => this.layout()).observe(this.root);
    else window.addEventListener("resize", () => this.layout());
    this.divider.addEventListener("keydown", (ev) => this.onKey(ev));
    this.view.addEventListener("pointerdown", (ev) => this.onPointerDown(ev));
    this.view.addEventListener("pointermove", (ev) => this.onPointerMove(ev));
    this.view.addEventListener("pointerup", () => this.endDrag());
    this.view.addEventListener("pointercancel", () => this.endDrag());
    this.setView("slider");
  }

  /** "slider" (one frame) or "side" (side by side, as the server rendered it). */
  setView(mode) {
    this.mode = mode === "side" ? "side" : "slider";
    this.root.classList.toggle("mode-slider", this.mode === "slider");
    this.root.classList.toggle("mode-side", this.mode === "side");
    this.press("[data-view]", "data-view", this.mode);
    if (this.mode === "side") {
      // the script's sizes and clip belong to the slider only
      for (const el of [this.view, this.canvas, this.after]) el.removeAttribute("style");
      this.root.classList.remove("is-zoomed");
      return;
    }
    this.setZoom(this.zoom);
  }

  /** "fit", "1" (100 %) or "2" (200 %). */
  setZoom(zoom) {
    this.zoom = zoom === "1" || zoom === "2" ? zoom : "fit";
    this.root.classList.toggle("is-zoomed", this.zoom !== "fit");
    this.press("[data-zoom]", "data-zoom", this.zoom);
    this.layout();
  }

  press(selector, attribute, value) {
    for (const button of this.tools.querySelectorAll(selector)) {
      button.setAttribute("aria-pressed", String(button.getAttribute(attribute) === value));
    }
  }

  /** The photo's (or video's) own size in pixels, once one of the two has loaded. */
  natural() {
    for (const m of this.media) {
      if (m.tagName === "VIDEO" && m.videoWidth) return [m.videoWidth, m.videoHeight];
      if (m.tagName === "IMG" && m.naturalWidth) return [m.naturalWidth, m.naturalHeight];
    }
    return null;
  }

  /** Size the frame and the picture for the zoom, keeping the point at the frame's centre in place. */
  layout() {
    if (this.mode !== "slider") return;
    const size = this.natural() || [16, 9];
    const viewW = this.view.clientWidth;
    if (!viewW) return;
    const maxH = Math.max(MIN_HEIGHT, window.innerHeight * MAX_HEIGHT_SHARE);
    const viewH = Math.min((viewW * size[1]) / size[0], maxH);
    const fit = Math.min(viewW / size[0], viewH / size[1]);
    const scale = this.zoom === "fit" ? fit : Number(this.zoom);
    if (this.scale) {
      const centreX = (this.lastW / 2 - this.panX) / this.scale, centreY = (this.lastH / 2 - this.panY) / this.scale;
      this.panX = viewW / 2 - centreX * scale;
      this.panY = viewH / 2 - centreY * scale;
    }
    Object.assign(this, { scale, size, lastW: viewW, lastH: viewH });
    this.view.style.height = viewH + "px";
    this.canvas.style.width = size[0] * scale + "px";
    this.canvas.style.height = size[1] * scale + "px";
    this.apply();
  }

  /** Keep the picture over the frame (centred when smaller), then place it, the clip and the divider. */
  apply() {
    const viewW = this.lastW, viewH = this.lastH;
    const w = this.size[0] * this.scale, h = this.size[1] * this.scale;
    this.panX = w <= viewW ? (viewW - w) / 2 : clamp(this.panX, viewW - w, 0);
    this.panY = h <= viewH ? (viewH - h) / 2 : clamp(this.panY, viewH - h, 0);
    this.canvas.style.transform = "translate(" + this.panX + "px, " + this.panY + "px)";
    const cut = clamp((this.split / 100) * viewW - this.panX, 0, w);
    this.after.style.clipPath = "inset(0 0 0 " + cut + "px)";
    this.divider.style.left = this.split + "%";
    const n = Math.round(this.split);
    this.divider.setAttribute("aria-valuenow", String(n));
    this.divider.setAttribute("aria-valuetext", this.valueWord.replace("{n}", String(n)));
  }

  setSplit(percent) {
    this.split = clamp(percent, 0, 100);
    if (this.scale) this.apply();
  }

  onKey(ev) {
    const step = ev.shiftKey ? BIG_STEP : STEP;
    const moves = {
      ArrowLeft: -step, ArrowDown: -step, ArrowRight: step, ArrowUp: step,
      PageDown: -BIG_STEP, PageUp: BIG_STEP, Home: -100, End: 100,
    };
    if (!(ev.key in moves)) return;
    ev.preventDefault(); // the page's own ← → (next/previous) and scrolling stay out of it
    this.setSplit(this.split + moves[ev.key]);
  }

  // At fit, pressing anywhere moves the divider there; zoomed in, pressing the picture (not the
  // divider) starts moving the picture.
  onPointerDown(ev) {
    if (this.mode !== "slider" || (ev.pointerType === "mouse" && ev.button !== 0)) return;
    const onDivider = this.divider.contains(ev.target);
    if (onDivider || this.zoom === "fit") {
      this.drag = { kind: "split" };
      this.splitAt(ev);
      this.divider.focus({ preventScroll: true });
    } else {
      this.drag = { kind: "pan", x: ev.clientX, y: ev.clientY, panX: this.panX, panY: this.panY };
      this.view.classList.add("is-panning");
    }
    this.view.setPointerCapture(ev.pointerId);
    ev.preventDefault();
  }

  onPointerMove(ev) {
    if (!this.drag) return;
    if (this.drag.kind === "split") {
      this.splitAt(ev);
      return;
    }
    this.panX = this.drag.panX + ev.clientX - this.drag.x;
    this.panY = this.drag.panY + ev.clientY - this.drag.y;
    this.apply();
  }

  endDrag() {
    this.drag = null;
    this.view.classList.remove("is-panning");
  }

  splitAt(ev) {
    const rect = this.view.getBoundingClientRect();
    if (rect.width) this.setSplit(((ev.clientX - rect.left) / rect.width) * 100);
  }
}
