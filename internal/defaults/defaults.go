// Package defaults fills the unset fields of a configuration from its defaults, the rule every
// kvroute Config follows: a number (count, size, duration) that is zero or negative means "the
// default". Strings, pointers and loggers take cmp.Or.
package defaults

// number is a count, byte size or time.Duration field.
type number interface {
	~int | ~int32 | ~int64 | ~float64
}

// Positive sets *field to def unless *field is above zero.
func Positive[T number](field *T, def T) {
	if *field <= 0 {
		*field = def
	}
}

// Override sets *field to v when v is above zero: a configured value replaces the default already
// in *field, and an unset (zero) or negative one keeps it.
func Override[T number](field *T, v T) {
	if v > 0 {
		*field = v
	}
}
