// The impairment proxy and the home-network models are a module of their own, which `tutti
// proxy` links without the rest of the simulation; tests and benchmarks reach them through this
// module as before.
@_exported import TuttiImpairment
