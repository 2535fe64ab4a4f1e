package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// newFlags returns the flag set of subcommand name; parse errors go to the caller, not to stderr.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args into fs and rejects positional arguments. Errors read
// "parsing NAME flags: ..." or "NAME: unexpected argument ..."; -h or --help returns a *helpError
// (runMain prints the usage and exits 0).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := parseOnly(fs, args); err != nil {
		return err
	}
	return noArgs(fs)
}

// parseOnly is fs.Parse with parseFlags' error wording and help handling.
func parseOnly(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &helpError{flags: fs}
		}
		return fmt.Errorf("parsing %s flags: %w", fs.Name(), err)
	}
	return nil
}

// helpError is returned by a subcommand asked for -h or --help; flags, when set, are the
// subcommand's flags, printed under its usage line.
type helpError struct{ flags *flag.FlagSet }

func (e *helpError) Error() string { return "help requested" }

// noArgs rejects the positional arguments left after parsing fs.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

// flagsSet returns the names of the flags of fs given on the command line.
func flagsSet(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// readLimited reads all of r, at most limit bytes. Errors read "reading WHAT: ...".
func readLimited(r io.Reader, limit int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("reading %s: larger than %d bytes", what, limit)
	}
	return b, nil
}

// readFileLimited reads the file at path, at most limit bytes. Errors read "reading WHAT: ...".
func readFileLimited(path string, limit int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	defer f.Close()
	return readLimited(f, limit, what)
}
