// A video's before and after as one: one Play/Pause and one position bar (#video-bar) drive the
// "before" video, and the "after" follows it. Pausing or seeking puts the after at exactly the
// before's time; while both play, the after's speed is nudged to close small drifts and it jumps
// when it falls too far behind (after a stall), so the two stay within a frame or two.

const clamp = (value, low, high) => Math.min(high, Math.max(low, value));

// seconds: a drift below IN_STEP is left alone, above JUMP the after seeks instead of speeding up
const IN_STEP = 0.015, JUMP = 0.3;
// how strongly a drift changes the after's speed (a 0.1 s lead plays it at 80 %), and the limits
const NUDGE = 2, SLOWEST = 0.5, FASTEST = 1.5;

/** "m:ss" (or "h:mm:ss") of a number of seconds. */
export function clock(seconds) {
  const s = Math.max(0, Math.floor(seconds || 0));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), ss = String(s % 60).padStart(2, "0");
  return h ? h + ":" + String(m).padStart(2, "0") + ":" + ss : m + ":" + ss;
}

export class VideoSync {
  /** `before`, `after`: the two <video>s; `bar`: #video-bar; `root`: #gallery (its data-word-*). */
  constructor(before, after, bar, root) {
    this.before = before;
    this.after = after;
    this.bar = bar;
    this.play = bar.querySelector("#video-play");
    this.seek = bar.querySelector("#video-seek");
    this.time = bar.querySelector("#video-time");
    this.words = { play: root.getAttribute("data-word-play") || "Play", pause: root.getAttribute("data-word-pause") || "Pause" };
    this.seeking = false; // the position bar is being dragged: timeupdate leaves it alone
    this.ticking = false;
  }

  start() {
    const { before, after } = this;
    before.controls = false;
    after.controls = false;
    after.muted = true; // one sound: the original's
    this.bar.hidden = false;
    this.play.addEventListener("click", () => (before.paused || before.ended ? this.playBoth() : before.pause()));
    this.seek.addEventListener("input", () => {
      this.seeking = true;
      before.currentTime = Number(this.seek.value);
      this.show();
    });
    this.seek.addEventListener("change", () => { this.seeking = false; });
    before.addEventListener("play", () => { this.playAfter(); this.tick(); this.label(); });
    before.addEventListener("pause", () => { after.pause(); this.align(); this.label(); });
    before.addEventListener("ended", () => { after.pause(); this.align(); this.label(); });
    before.addEventListener("seeking", () => this.align());
    before.addEventListener("seeked", () => this.align());
    before.addEventListener("ratechange", () => { after.playbackRate = before.playbackRate; });
    for (const ev of ["loadedmetadata", "durationchange", "timeupdate"]) before.addEventListener(ev, () => this.show());
    after.addEventListener("loadedmetadata", () => this.align());
    this.show();
    this.label();
  }

  playBoth() {
    this.align();
    const started = this.before.play();
    if (started && started.catch) started.catch(() => this.label());
  }

  playAfter() {
    const started = this.after.play();
    if (started && started.catch) started.catch(() => { /* the before plays on; the next tick retries */ });
  }

  /** The after at exactly the before's time (paused, seeking, or fallen too far behind). */
  align() {
    const { before, after } = this;
    if (after.readyState < 1) return; // no metadata yet: loadedmetadata calls again
    if (Math.abs(after.currentTime - before.currentTime) > 0.001) after.currentTime = before.currentTime;
    after.playbackRate = before.playbackRate;
  }

  // While playing, once a frame: how far the after is from the before, and what to do about it.
  tick() {
    if (this.ticking) return;
    this.ticking = true;
    const step = () => {
      const { before, after } = this;
      if (before.paused || before.ended) {
        this.ticking = false;
        return;
      }
      if (after.paused && !after.ended) this.playAfter();
      const drift = after.currentTime - before.currentTime;
      if (Math.abs(drift) > JUMP) after.currentTime = before.currentTime;
      else if (Math.abs(drift) > IN_STEP) after.playbackRate = before.playbackRate * clamp(1 - drift * NUDGE, SLOWEST, FASTEST);
      else after.playbackRate = before.playbackRate;
      window.requestAnimationFrame(step);
    };
    window.requestAnimationFrame(step);
  }

  show() {
    const duration = Number.isFinite(this.before.duration) ? this.before.duration : 0;
    this.seek.max = String(duration);
    if (!this.seeking) this.seek.value = String(this.before.currentTime);
    this.time.textContent = clock(this.before.currentTime) + " / " + clock(duration);
  }

  label() {
    const playing = !this.before.paused && !this.before.ended;
    this.play.textContent = playing ? this.words.pause : this.words.play;
  }
}
