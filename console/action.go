package console

// actionRoutes registers the forms that change something (see the
// action handlers).
func (c *Console) actionRoutes() {}
