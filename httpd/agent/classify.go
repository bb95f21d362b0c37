package agent

// feature is one fact a token shows; Classify gathers them as a bit set in
// one pass over the User-Agent and then decides from the bits alone.
type feature uint32

const (
	fPreview feature = 1 << iota
	fCrawler
	fEdge
	fOpera
	fSamsung
	fFirefox
	fOtherBrowser // Chromium-based browsers outside the list, WebViews
	fChrome
	fSafari
	fVersion
	fWindows
	fIOS
	fIPad
	fMac
	fAndroid
	fChromeOS
	fLinux
	fX11
	fMobile
	fTablet
)

// token is a byte string whose presence shows a feature.
type token struct {
	text    string
	feature feature
	fold    bool // match in any ASCII case; text is lower case
	wordEnd bool // match only if no lower-case letter follows
}

// tokens lists what Classify looks for. They were written for this package
// from the User-Agents in the tests and the vendors' documentation; no
// third-party list is copied.
var tokens = [...]token{
	// Link unfurlers. They win over every crawler rule: several contain
	// "bot", and iMessage's previewer otherwise looks like Safari.
	{text: "Slackbot", feature: fPreview},
	{text: "Slack-ImgProxy", feature: fPreview},
	{text: "Twitterbot", feature: fPreview},
	{text: "facebookexternalhit", feature: fPreview},
	{text: "Facebot", feature: fPreview},
	{text: "WhatsApp/", feature: fPreview},
	{text: "TelegramBot", feature: fPreview},
	{text: "Discordbot", feature: fPreview},
	{text: "LinkedInBot", feature: fPreview},
	{text: "SkypeUriPreview", feature: fPreview},
	{text: "redditbot", feature: fPreview},
	{text: "Pinterestbot", feature: fPreview},
	{text: "Pinterest/0.", feature: fPreview}, // not the app's "[Pinterest/iOS]"
	{text: "Iframely", feature: fPreview},
	{text: "Embedly", feature: fPreview},
	{text: "Mastodon/", feature: fPreview},
	{text: "Bluesky Cardyb", feature: fPreview},
	{text: "Synapse (bot", feature: fPreview},
	{text: "vkShare", feature: fPreview},
	{text: "Snap URL Preview", feature: fPreview},

	// Crawlers by their generic words: Googlebot/2.1, bingbot/2.0,
	// AhrefsBot; but not "Bottle", nor the phone brand CUBOT.
	{text: "bot", feature: fCrawler, wordEnd: true},
	{text: "Bot", feature: fCrawler, wordEnd: true},
	{text: "crawl", feature: fCrawler, fold: true},
	{text: "spider", feature: fCrawler, fold: true},
	{text: "scraper", feature: fCrawler, fold: true},
	{text: "archiver", feature: fCrawler, fold: true},
	// Crawlers and tools those words miss.
	{text: "Google-InspectionTool", feature: fCrawler},
	{text: "Mediapartners-Google", feature: fCrawler},
	{text: "Google-Read-Aloud", feature: fCrawler},
	{text: "eedfetcher-Google", feature: fCrawler}, // FeedFetcher- and Feedfetcher-
	{text: "eedFetcher-Google", feature: fCrawler},
	{text: "meta-externalagent", feature: fCrawler},
	{text: "facebookcatalog", feature: fCrawler},
	{text: "HeadlessChrome", feature: fCrawler},
	{text: "Lighthouse", feature: fCrawler},
	{text: "PhantomJS", feature: fCrawler},
	{text: "Slurp", feature: fCrawler},
	{text: "Nutch", feature: fCrawler},
	{text: "Scrapy/", feature: fCrawler},

	// Browsers. Edge, Opera, Samsung Internet and the others also send
	// Chrome/ (or CriOS/), so browser checks them first.
	{text: "Edg/", feature: fEdge},
	{text: "EdgA/", feature: fEdge},
	{text: "EdgiOS/", feature: fEdge},
	{text: "Edge/", feature: fEdge},
	{text: "OPR/", feature: fOpera},
	{text: "Opera", feature: fOpera},
	{text: "OPiOS/", feature: fOpera},
	{text: "OPT/", feature: fOpera},
	{text: "SamsungBrowser/", feature: fSamsung},
	{text: "Firefox/", feature: fFirefox},
	{text: "FxiOS/", feature: fFirefox},
	{text: "Silk/", feature: fOtherBrowser | fTablet}, // Kindle Fire
	{text: "YaBrowser/", feature: fOtherBrowser},
	{text: "UCBrowser/", feature: fOtherBrowser},
	{text: "Vivaldi/", feature: fOtherBrowser},
	{text: "MiuiBrowser/", feature: fOtherBrowser},
	{text: "HuaweiBrowser/", feature: fOtherBrowser},
	{text: "Whale/", feature: fOtherBrowser},
	{text: "; wv)", feature: fOtherBrowser}, // Android WebView: an app, not Chrome
	{text: "Chrome/", feature: fChrome},
	{text: "CriOS/", feature: fChrome},
	{text: "Safari/", feature: fSafari},
	{text: "Version/", feature: fVersion},

	// Systems and devices.
	{text: "Windows", feature: fWindows},
	{text: "iPhone", feature: fIOS | fMobile},
	{text: "iPod", feature: fIOS | fMobile},
	{text: "iPad", feature: fIOS | fIPad},
	{text: "Macintosh", feature: fMac},
	{text: "Android", feature: fAndroid},
	{text: "CrOS", feature: fChromeOS},
	{text: "Linux", feature: fLinux},
	{text: "X11", feature: fX11},
	{text: "Mobi", feature: fMobile},
	{text: "Tablet", feature: fTablet},
	{text: "Kindle", feature: fTablet},
}

// byFirst lists, for each byte, the tokens that start with it (in both
// cases for fold tokens), so the scan tries only the tokens that can match
// at each offset. It is built once and never changed.
var byFirst = indexTokens()

func indexTokens() *[256][]uint8 {
	var idx [256][]uint8
	for i, t := range tokens {
		c := t.text[0]
		idx[c] = append(idx[c], uint8(i))
		if t.fold && lower(c) != upper(c) {
			idx[upper(c)] = append(idx[upper(c)], uint8(i))
		}
	}
	return &idx
}

// scan returns the features of every token in ua.
func scan(ua []byte) feature {
	var f feature
	for i := range ua {
		for _, k := range byFirst[ua[i]] {
			if t := &tokens[k]; f&t.feature != t.feature && t.matches(ua[i:]) {
				f |= t.feature
			}
		}
	}
	return f
}

func (t *token) matches(s []byte) bool {
	n := len(t.text)
	if len(s) < n {
		return false
	}
	if t.fold {
		if !equalFold(s[:n], t.text) {
			return false
		}
	} else if string(s[:n]) != t.text {
		return false
	}
	return !t.wordEnd || len(s) == n || !isLower(s[n])
}

// Classify classifies one User-Agent. It reads ua once and does not
// allocate; Cache spares repeating it.
func Classify(ua []byte) Class {
	f := scan(ua)
	switch {
	case f&fPreview != 0:
		return bot(Preview)
	case f&fCrawler != 0:
		return bot(Crawler)
	}
	return Class{Browser: browser(f), OS: operatingSystem(f), Device: device(f)}
}

// bot is the Class of a bot: it has no browser, system or device worth
// counting.
func bot(b Bot) Class {
	return Class{Browser: OtherBrowser, OS: OtherOS, Device: DeviceUnknown, Bot: b}
}

func browser(f feature) string {
	switch {
	case f&fEdge != 0:
		return Edge
	case f&fOpera != 0:
		return Opera
	case f&fSamsung != 0:
		return SamsungInternet
	case f&fFirefox != 0:
		return Firefox
	case f&fOtherBrowser != 0:
		return OtherBrowser
	case f&fChrome != 0:
		return Chrome
	// Safari says Version/; iOS in-app browsers that imitate it lack the
	// token, and old Android browsers that have it are not Safari.
	case f&(fSafari|fVersion) == fSafari|fVersion && f&fAndroid == 0:
		return Safari
	}
	return OtherBrowser
}

func operatingSystem(f feature) string {
	switch {
	// iOS before macOS: iOS strings say "like Mac OS X".
	case f&fIOS != 0:
		return IOS
	case f&fWindows != 0:
		return Windows
	case f&fMac != 0:
		return MacOS
	// Android and ChromeOS before Linux: both say Linux too.
	case f&fAndroid != 0:
		return Android
	case f&fChromeOS != 0:
		return ChromeOS
	case f&fLinux != 0:
		return Linux
	}
	return OtherOS
}

func device(f feature) Device {
	switch {
	case f&(fIPad|fTablet) != 0:
		return Tablet
	// Android phones say Mobile; Android tablets do not.
	case f&fAndroid != 0 && f&fMobile == 0:
		return Tablet
	case f&fMobile != 0:
		return Mobile
	case f&(fWindows|fMac|fChromeOS) != 0, f&(fLinux|fX11) == fLinux|fX11:
		return Desktop
	}
	return DeviceUnknown
}

func equalFold(s []byte, lowerText string) bool {
	for i := range len(lowerText) {
		if lower(s[i]) != lowerText[i] {
			return false
		}
	}
	return true
}

func isLower(c byte) bool { return 'a' <= c && c <= 'z' }

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}
