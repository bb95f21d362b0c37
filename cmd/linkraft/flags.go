package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// flagDef is one flag and everything said about it, so that a flag is
// declared in one place: registerFlags registers it, applyEnv reads its
// environment variable (envName), checkFlags validates it, and README.md's
// Flags table is rendered from it (TestReadmeFlagTable). rqlite generates
// its flags from one table for the same reason; this table is Go, read at
// run time, so no generated code has to be kept in step with it.
type flagDef struct {
	name   string     // without dashes: "http-addr"
	target flagTarget // the variable it sets, and its default
	usage  string     // what -h says

	// check runs after the command line and the environment were read:
	// the error that stops the start, or nil. It may keep what it parsed
	// (--cluster-key's key) so that the value is parsed once. Rules over
	// several flags hang on the one their message names first.
	check func() error

	// readme is the meaning column of the flag's row in README.md's Flags
	// table; a flag that shares the row before (--create-burst beside
	// --create-rate) has sharesRow instead. readmeDefault is the default
	// column when the default -h prints is not what a reader needs ("host
	// name"); else it is rendered from that default.
	readme        string
	readmeDefault string
	sharesRow     bool
}

// flagTarget registers a flag, by name and usage, on its variable with
// its default.
type flagTarget func(fs *flag.FlagSet, name, usage string)

// flagType is the types of values the flag package parses.
type flagType interface {
	string | int | bool | uint64 | float64 | time.Duration
}

// flagVar is the target p, which starts as def.
func flagVar[T flagType](p *T, def T) flagTarget {
	return func(fs *flag.FlagSet, name, usage string) {
		switch p := any(p).(type) {
		case *string:
			fs.StringVar(p, name, any(def).(string), usage)
		case *int:
			fs.IntVar(p, name, any(def).(int), usage)
		case *bool:
			fs.BoolVar(p, name, any(def).(bool), usage)
		case *uint64:
			fs.Uint64Var(p, name, any(def).(uint64), usage)
		case *float64:
			fs.Float64Var(p, name, any(def).(float64), usage)
		case *time.Duration:
			fs.DurationVar(p, name, any(def).(time.Duration), usage)
		}
	}
}

// envName is the environment variable a flag reads: LINKRAFT_ and its
// name in capitals, dashes as underscores (--http-addr: LINKRAFT_HTTP_ADDR).
func envName(flagName string) string {
	return "LINKRAFT_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// registerFlags registers defs on fs.
func registerFlags(fs *flag.FlagSet, defs []flagDef) {
	for _, d := range defs {
		d.target(fs, d.name, d.usage)
	}
}

// applyEnv sets every flag of fs from its environment variable
// (envName) when that is set. The command line is parsed afterwards, so
// it wins. The value is set on the flag's Value, not through fs.Set, so
// that fs.Visit still sees the command line's flags only (a cluster key
// there is warned about).
func applyEnv(fs *flag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		env := envName(f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", env, err))
			}
		}
	})
	return errors.Join(errs...)
}

// flagNames are the names of defs.
func flagNames(defs []flagDef) []string {
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.name
	}
	return names
}

// checkFlags runs the checks of defs in order and returns the first error.
func checkFlags(defs []flagDef) error {
	for _, d := range defs {
		if d.check == nil {
			continue
		}
		if err := d.check(); err != nil {
			return err
		}
	}
	return nil
}
