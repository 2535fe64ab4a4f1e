// Command kvroute is the operators' command line for debugging routing (DESIGN.md §10a).
//
// Every subcommand prints one JSON object on stdout; logs go to stderr. On error it prints
// {"error": "..."} and exits 2.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
)

// subcommand runs one kvroute subcommand with its own arguments and returns the value printed as
// JSON on stdout.
type subcommand struct {
	usage string
	run   func(args []string) (any, error)
}

// subcommands is filled by the init functions of the files that define each subcommand.
var subcommands = map[string]subcommand{}

func register(name, usage string, run func(args []string) (any, error)) {
	subcommands[name] = subcommand{usage: usage, run: run}
}

func main() {
	os.Exit(runMain(os.Args[1:]))
}

func runMain(args []string) int {
	if len(args) == 0 {
		return fail(fmt.Errorf("usage: kvroute <%s> [flags]", names()))
	}
	sc, ok := subcommands[args[0]]
	if !ok {
		return fail(fmt.Errorf("unknown subcommand %q (have %s)", args[0], names()))
	}
	out, err := sc.run(args[1:])
	if err != nil {
		return fail(err)
	}
	if err := writeJSON(out); err != nil {
		return fail(err)
	}
	return 0
}

func names() string {
	var ns []string
	for n := range subcommands {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	s := ""
	for i, n := range ns {
		if i > 0 {
			s += "|"
		}
		s += n
	}
	return s
}

func writeJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func fail(err error) int {
	_ = writeJSON(map[string]string{"error": err.Error()})
	return 2
}
