// ← and → go to the previous and next target, as the page's own links do. Keys meant for
// something else are left alone: typing, a slider's or a video's arrows, and Alt+← (history).

const OWN_ARROWS = "input, textarea, select, video, audio, [contenteditable], [role=slider]";

/** Make ArrowLeft follow `previous` and ArrowRight follow `next` (either may be null). */
export function arrowsFollowLinks(previous, next) {
  document.addEventListener("keydown", (ev) => {
    if (ev.defaultPrevented || ev.altKey || ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
    if (ev.key !== "ArrowLeft" && ev.key !== "ArrowRight") return;
    if (ev.target instanceof Element && ev.target.closest(OWN_ARROWS)) return;
    const link = ev.key === "ArrowLeft" ? previous : next;
    if (!link || !link.href) return;
    ev.preventDefault();
    window.location.assign(link.href);
  });
}
