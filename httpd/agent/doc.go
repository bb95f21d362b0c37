// Package agent owns the classification of HTTP User-Agent strings for the
// visit statistics: which browser, operating system and class of device a
// click came from, and whether it came from a person, a crawler or a link
// previewer. It is pure: no I/O, and no state outside the Cache a caller
// makes.
//
// # What it tells apart
//
// Browsers, operating systems and devices are kept to short fixed lists (see
// the constants), because the statistics show shares, and a long tail of
// versions and forks only splits them. Chromium forks that announce
// themselves (Edge, Opera, Samsung Internet) are named; those that do not
// (Brave, most in-app browsers) count as Chrome; Android WebViews and
// iOS in-app browsers without Safari's Version token count as other. iPads
// whose Safari asks for desktop sites send a Mac's User-Agent and count as
// macOS desktops: nothing in the string tells them apart.
//
// Bots come in two kinds because they mean different things for a link.
// A preview is a link unfurler fetching the page once when someone pastes
// the link into a chat or post (Slack, Twitter/X, Facebook and iMessage,
// WhatsApp, Telegram, Discord, LinkedIn, Skype and Teams, Reddit,
// Pinterest, Mastodon, Bluesky, Matrix, Iframely, Embedly); it shows that a
// link was shared, not that it was followed. A crawler is a robot that
// fetches pages for itself: search engines, AI and SEO crawlers, crawling
// frameworks and headless browsers. HTTP libraries, command-line tools and
// empty User-Agents are not bots here: behind a script or an app following
// a link there is usually someone who asked for it, and an operator trying
// a link with curl expects it counted; their browser, system and device
// are "other". Applebot is a crawler: it feeds Apple's search,
// while iMessage previews identify as facebookexternalhit and Twitterbot.
// For bots, Browser and OS are "other" and Device is unknown, so that bots
// do not show up in the browser and device shares.
//
// # Why no library
//
// The Go User-Agent parsers considered (mileusna/useragent,
// mssola/useragent, medama-io/go-useragent, x-way/crawlerdetect) do not
// separate previews from crawlers, which is the distinction that matters
// most here; they also extract versions and device names this package has
// no use for, or (crawlerdetect) run a long list of regular expressions on
// every string; and the module proxy this project builds from lists no
// version of the last two. The question asked here is small enough for one
// table of tokens, written for this package (no third-party list is
// copied), that Classify finds in a single pass over the string, followed
// by a few ordered rules on what it found; a table of real User-Agents in
// the tests pins the answers down. Classify does not allocate and takes
// one to two microseconds for a browser's User-Agent; Cache makes a
// repeated User-Agent cost one hash and one comparison.
package agent
