package chat

// ObjectEnd exposes objectEnd to the external tests.
var ObjectEnd = objectEnd
