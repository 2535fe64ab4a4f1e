// Command kvroute is the operators' command line for debugging routing (DESIGN.md §10a).
//
// Every subcommand prints one JSON object on stdout; logs go to stderr. On error it prints
// {"error": "..."} and exits 2. `kvroute --help` and `kvroute SUB --help` print usage text on
// stdout and exit 0.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	os.Exit(runMain(os.Args[1:], os.Stdout))
}

// runMain runs one command line and returns the exit code. `kvroute --help` (or -h, help) and
// `kvroute help SUB` / `kvroute SUB --help` print usage text on stdout and exit 0.
func runMain(args []string, stdout io.Writer) int {
	if len(args) == 0 {
		return fail(fmt.Errorf("usage: kvroute <%s> [flags] (kvroute --help for more)", names()))
	}
	if isHelpFlag(args[0]) || args[0] == "help" {
		if len(args) > 1 {
			if sc, ok := subcommands[args[1]]; ok {
				_, err := sc.run([]string{"--help"}) // every subcommand parses its flags first
				return printHelp(stdout, args[1], sc, err)
			}
		}
		printUsage(stdout)
		return 0
	}
	sc, ok := subcommands[args[0]]
	if !ok {
		return fail(fmt.Errorf("unknown subcommand %q (have %s)", args[0], names()))
	}
	out, err := sc.run(args[1:])
	var he *helpError
	if errors.As(err, &he) {
		return printHelp(stdout, args[0], sc, err)
	}
	if err != nil {
		return fail(err)
	}
	if err := writeJSON(out); err != nil {
		return fail(err)
	}
	return 0
}

// isHelpFlag reports whether arg asks for help.
func isHelpFlag(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// printUsage writes the command's usage: every subcommand's synopsis.
func printUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: kvroute <subcommand> [flags]\n\n"+
		"kvroute debugs kvroute's routing from outside the router (DESIGN.md §10a). Every subcommand\n"+
		"prints one JSON object on stdout; on error it prints {\"error\": \"...\"} and exits 2.\n\nsubcommands:\n")
	var ns []string
	for n := range subcommands {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	for _, n := range ns {
		fmt.Fprintf(w, "  kvroute %s\n", subcommands[n].usage)
	}
	fmt.Fprintf(w, "\nkvroute <subcommand> --help describes a subcommand's flags.\n")
}

// printHelp writes the usage of subcommand name and, when the subcommand returned a *helpError
// with its flag set, its flags with their defaults; exit code 0.
func printHelp(w io.Writer, name string, sc subcommand, err error) int {
	fmt.Fprintf(w, "usage: kvroute %s\n", sc.usage)
	var he *helpError
	if errors.As(err, &he) && he.flags != nil {
		fmt.Fprintf(w, "\nflags of %s:\n", name)
		he.flags.SetOutput(w)
		he.flags.PrintDefaults()
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
