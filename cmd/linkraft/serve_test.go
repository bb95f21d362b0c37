package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestNewLoggerFormats(t *testing.T) {
	tests := []struct {
		format, level string
		wantErr       string
		isJSON        bool
	}{
		{format: "text", level: "info"},
		{format: "json", level: "debug", isJSON: true},
		{format: "yaml", level: "info", wantErr: "--log-format must be text or json"},
		{format: "", level: "info", wantErr: "--log-format must be text or json"},
		{format: "json", level: "loud", wantErr: "--log-level"},
	}
	for _, tt := range tests {
		t.Run(tt.format+"/"+tt.level, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := newLogger(tt.level, tt.format, &buf)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("want an error containing %q, got %v", tt.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			log.Info("hello", "k", "v")
			var m map[string]any
			gotJSON := json.Unmarshal(buf.Bytes(), &m) == nil
			if gotJSON != tt.isJSON || !strings.Contains(buf.String(), "hello") {
				t.Fatalf("format %s: got %q", tt.format, buf.String())
			}
		})
	}
}
