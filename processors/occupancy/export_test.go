package occupancy

// WithUnorderedOutputs runs occupancy-members without group.OrderedOutputs,
// for the test that shows the counts go wrong without it.
func WithUnorderedOutputs() Opt { return func(c *config) { c.unorderedOutputs = true } }
