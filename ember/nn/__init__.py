"""ember.nn: modules, parameters, functional, init."""
