"""Server plumbing that is not about ViTs: the request guard and who a client is (`guard`, `limits`,
`clients`), admission of computing jobs (`admission`), bounded stores and swept folders (`cache`), memory
given back and chores on a clock (`memory`), and whether the network is there (`net`).

Each module imports only `attention.config`, `attention.errors` and its neighbours here; nothing is
imported by this `__init__` (import the module you need).
"""
