"""The consumer (seed 002 threading design): application-thread API, network-thread request managers, the
member state machines of both group protocols, and the fetch buffer they hand records through."""
