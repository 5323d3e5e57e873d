// Moore sequence detector: `found` is high for the cycle after the serial input `din` has
// shown the bits 1, 0, 1, 1 (oldest first) on four consecutive clock edges. Matches may
// overlap: 1011011 is found twice. Synchronous active-high reset.
module fsm (
    input  wire clk,
    input  wire rst,
    input  wire din,
    output wire found
);
    // How much of 1011 the latest inputs match.
    localparam S0 = 3'd0, S1 = 3'd1, S10 = 3'd2, S101 = 3'd3, S1011 = 3'd4;

    reg [2:0] state;
    reg [2:0] next;

    always @(*) begin
        case (state)
            S0:      next = din ? S1    : S0;
            S1:      next = din ? S1    : S10;
            S10:     next = din ? S101  : S0;
            S101:    next = din ? S1011 : S10;
            S1011:   next = din ? S1    : S10;
            default: next = S0;
        endcase
    end

    always @(posedge clk) begin
        if (rst)
            state <= S0;
        else
            state <= next;
    end

    assign found = (state == S1011);
endmodule
