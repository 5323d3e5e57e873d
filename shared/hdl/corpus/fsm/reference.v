// Reference detector: remember the last four inputs and compare them with the pattern.
// `seen` counts the inputs since reset (up to four) so that reset values never match.
module fsm (
    input  wire clk,
    input  wire rst,
    input  wire din,
    output wire found
);
    reg [3:0] last;   // last[0] is the newest input
    reg [2:0] seen;

    always @(posedge clk) begin
        if (rst) begin
            last <= 4'b0000;
            seen <= 3'd0;
        end else begin
            last <= {last[2:0], din};
            if (seen != 3'd4)
                seen <= seen + 3'd1;
        end
    end

    assign found = (seen == 3'd4) && (last == 4'b1011);
endmodule
