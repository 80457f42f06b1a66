// A target's results page (#gallery, templates/jobs/target_detail.html), loaded as
// <script type="module">. The server renders before and after side by side; this turns them into
// one frame with a divider and zoom (compare.js), drives a video's before and after as one
// (video_sync.js), and goes to the previous or next target with ← and → (keys.js). Without
// scripts the page stays side by side, and the links still go back and forth.

import { Compare } from "./compare.js";
import { arrowsFollowLinks } from "./keys.js";
import { VideoSync } from "./video_sync.js";

const root = document.getElementById("gallery");

if (root) {
  arrowsFollowLinks(document.getElementById("gallery-prev"), document.getElementById("gallery-next"));
  const hint = document.getElementById("gallery-hint");
  if (hint) hint.hidden = false;
  const gallery = {};
  if (root.getAttribute("data-compare") === "true") {
    gallery.compare = new Compare(root);
    gallery.compare.start();
  }
  const before = document.getElementById("video-before"), after = document.getElementById("video-after");
  const bar = document.getElementById("video-bar");
  if (before && after && bar) {
    gallery.videos = new VideoSync(before, after, bar, root);
    gallery.videos.start();
  }
  window.ffpGallery = gallery; // for debugging in the browser's console
}
