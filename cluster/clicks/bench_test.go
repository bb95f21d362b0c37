package clicks

import (
	"fmt"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// BenchmarkRecordClick measures click aggregation on the redirect path:
// counting redirects of 1000 codes, with the counts taken into a batch
// after every 10 000 clicks as a flush would. Codes are the FSM's own
// strings, as the redirect handler passes them, each with one of a few
// visitors.
func BenchmarkRecordClick(b *testing.B) {
	c := New(Config{Node: "n1", Dir: b.TempDir(), Applied: fsm.New()})
	codes := make([]string, 1000)
	for i := range codes {
		codes[i] = fmt.Sprintf("c%06d", i)
	}
	// Warm both maps to their working size, as a running node has them.
	visitors := []fsm.Visitor{
		{Referrer: "news.example", Country: [2]byte{'D', 'E'}, Browser: fsm.Chrome, OS: fsm.Windows, Device: fsm.DeviceClassDesktop},
		{Country: [2]byte{'U', 'S'}, Browser: fsm.Safari, OS: fsm.IOS, Device: fsm.DeviceClassMobile},
		{Bot: fsm.Preview},
	}
	for range 2 {
		for i, code := range codes {
			c.Record(code, visitors[i%len(visitors)])
		}
		c.take(time.Now())
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.Record(codes[i%len(codes)], visitors[i%len(visitors)])
		if i++; i%10000 == 0 {
			b.StopTimer()
			c.take(time.Now())
			b.StartTimer()
		}
	}
}
