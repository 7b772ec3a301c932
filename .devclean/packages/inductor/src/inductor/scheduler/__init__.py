"""The scheduler: dependencies, dead-code removal, fusion into kernel groups, ordering."""
