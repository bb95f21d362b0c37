package agent

// Browsers, as Class.Browser reports them.
const (
	Chrome          = "Chrome"
	Safari          = "Safari"
	Firefox         = "Firefox"
	Edge            = "Edge"
	Opera           = "Opera"
	SamsungInternet = "Samsung Internet"
	OtherBrowser    = "other"
)

// Operating systems, as Class.OS reports them.
const (
	Windows  = "Windows"
	MacOS    = "macOS"
	IOS      = "iOS"
	Android  = "Android"
	Linux    = "Linux"
	ChromeOS = "ChromeOS"
	OtherOS  = "other"
)

// Device is the class of device a browser runs on.
type Device uint8

// Devices. The zero value is unknown.
const (
	DeviceUnknown Device = iota
	Desktop
	Mobile
	Tablet
)

var deviceNames = [...]string{"unknown", "desktop", "mobile", "tablet"}

// String returns the device class's lower-case name, as stored and shown.
func (d Device) String() string {
	if int(d) < len(deviceNames) {
		return deviceNames[d]
	}
	return "unknown"
}

// Bot says whether a request was automated, and how.
type Bot uint8

// Kinds of bots. The zero value is a person's browser.
const (
	NotBot  Bot = iota
	Crawler     // search engines, other crawlers, scripts and tools
	Preview     // link unfurlers of chat and social apps
)

var botNames = [...]string{"none", "crawler", "preview"}

// String returns the kind's lower-case name, as stored and shown.
func (b Bot) String() string {
	if int(b) < len(botNames) {
		return botNames[b]
	}
	return "none"
}

// Class is what a User-Agent says about a visitor. Browser and OS are
// always one of the constants above, so a Class is cheap to copy and
// compare, and never refers to the User-Agent it came from.
type Class struct {
	Browser string
	OS      string
	Device  Device
	Bot     Bot
}
